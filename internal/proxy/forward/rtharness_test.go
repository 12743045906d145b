package forward

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/route"
)

// rtCluster builds static cluster "be" with endpoints addrs (each
// "ip:port") on a new cluster manager; edit may change the proto first.
func rtCluster(t *testing.T, edit func(*clusterv3.Cluster), addrs ...string) *cluster.Cluster {
	t.Helper()
	c := hopStaticCluster("be", addrs...)
	c.ConnectTimeout = durationpb.New(time.Second)
	if edit != nil {
		edit(c)
	}
	m, _ := hopManager(t, c)
	return m.Get("be")
}

// rtRoute compiles a route "/" to cluster "be" with action a (its
// cluster set here); attempts sets include_request_attempt_count.
func rtRoute(t *testing.T, a *routev3.RouteAction, attempts bool) *route.Route {
	t.Helper()
	if a == nil {
		a = &routev3.RouteAction{}
	}
	a.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: "be"}
	return rtCompile(t, &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action: &routev3.Route_Route{Route: a}}, attempts, "/")
}

// rtCompile compiles r alone in a virtual host and returns the route that
// path matches.
func rtCompile(t *testing.T, r *routev3.Route, attempts bool, path string) *route.Route {
	t.Helper()
	tbl, err := route.Compile(&routev3.RouteConfiguration{Name: "r", VirtualHosts: []*routev3.VirtualHost{{
		Name: "all", Domains: []string{"*"}, IncludeRequestAttemptCount: attempts,
		Routes: []*routev3.Route{r}}}})
	if err != nil {
		t.Fatal(err)
	}
	rt := tbl.Match("be.test", path, http.Header{})
	if rt == nil {
		t.Fatal("no route")
	}
	return rt
}

// rtRetryPolicy is a retry policy with a 1 ms back-off.
func rtRetryPolicy(on string, n uint32) *routev3.RetryPolicy {
	return &routev3.RetryPolicy{RetryOn: on, NumRetries: wrapperspb.UInt32(n),
		RetryBackOff: &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(time.Millisecond), MaxInterval: durationpb.New(2 * time.Millisecond)}}
}

// rtBackend is an HTTP/1.1 backend that records each attempt (its
// X-Envoy-Attempt-Count and body) and answers attempt n (from 1) with
// answer(n, w, r).
type rtBackend struct {
	*httptest.Server
	mu     sync.Mutex
	counts []string
	bodies []string
}

func rtServe(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *rtBackend {
	t.Helper()
	b := &rtBackend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.counts = append(b.counts, r.Header.Get("X-Envoy-Attempt-Count"))
		b.bodies = append(b.bodies, string(body))
		n := len(b.counts)
		b.mu.Unlock()
		answer(n, w, r)
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *rtBackend) addr() string { return b.Listener.Addr().String() }

func (b *rtBackend) attempts() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.counts)
}

// rtStatus answers the first fail attempts with status, then 200 "ok".
func rtStatus(fail, status int) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		if n <= fail {
			w.WriteHeader(status)
			fmt.Fprint(w, "fail "+strconv.Itoa(n))
			return
		}
		fmt.Fprint(w, "ok "+strconv.Itoa(n))
	}
}

// rtRefused is a loopback address where nothing listens.
func rtRefused(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

// rtSend round-trips a request with body (nil: none) through cl on rt to
// the first endpoint picked, and returns the exchange with its response
// body read (and the body, "" when there is no response).
func rtSend(t *testing.T, cl *cluster.Cluster, rt *route.Route, req *http.Request) (*Exchange, string) {
	t.Helper()
	ep, err := cl.Pick(netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	x := RoundTrip(req, cl, ep, rt, TakeOverrides(req.Header), netip.AddrPort{}, cluster.OriginalSource{})
	t.Cleanup(x.Done)
	if x.Resp == nil {
		return x, ""
	}
	b, _ := io.ReadAll(x.Resp.Body)
	x.Resp.Body.Close()
	return x, string(b)
}
