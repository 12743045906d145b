package forward

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// hopStaticCluster is a STATIC cluster of the endpoints at addrs.
func hopStaticCluster(name string, addrs ...string) *clusterv3.Cluster {
	var lbs []*endpointv3.LbEndpoint
	for _, a := range addrs {
		ap := netip.MustParseAddrPort(a)
		lbs = append(lbs, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: ap.Addr().String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(ap.Port())}}}}}}})
	}
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(5 * time.Second),
		LoadAssignment:       &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: lbs}}},
	}
}

// hopManager is a cluster manager holding cs, closed when the test ends.
func hopManager(t *testing.T, cs ...*clusterv3.Cluster) (*cluster.Manager, *stats.Store) {
	t.Helper()
	st := stats.New()
	cm := cluster.NewManager(slog.New(slog.DiscardHandler), st)
	if err := cm.AddStatic(cs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cm.Close)
	return cm, st
}

// hopSeen is one request a hopBackend received.
type hopSeen struct {
	Method, URI, Host string
	Header            http.Header
	Body              string
	ProtoMajor        int
	ContentLength     int64
	TransferEncoding  []string
}

// hopBackend is an HTTP/1.1 server on loopback that records each request
// and answers 202.
type hopBackend struct {
	srv  *httptest.Server
	seen chan hopSeen
}

func newHopBackend(t *testing.T) *hopBackend { return newHopBackendH2C(t, false) }

// newHopBackendH2C is newHopBackend, serving HTTP/2 without TLS (h2c,
// prior knowledge) too when h2c is set.
func newHopBackendH2C(t *testing.T, h2c bool) *hopBackend {
	t.Helper()
	b := &hopBackend{seen: make(chan hopSeen, 64)}
	b.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.seen <- hopSeen{Method: r.Method, URI: r.RequestURI, Host: r.Host, Header: r.Header.Clone(), Body: string(body),
			ContentLength: r.ContentLength, TransferEncoding: r.TransferEncoding, ProtoMajor: r.ProtoMajor}
		w.WriteHeader(http.StatusAccepted)
	}))
	if h2c {
		b.srv.Config.Protocols = new(http.Protocols)
		b.srv.Config.Protocols.SetHTTP1(true)
		b.srv.Config.Protocols.SetUnencryptedHTTP2(true)
	}
	b.srv.Start()
	t.Cleanup(b.srv.Close)
	return b
}

func (b *hopBackend) addr() string { return strings.TrimPrefix(b.srv.URL, "http://") }

// next waits (generously) for the next request.
func (b *hopBackend) next(t *testing.T) hopSeen {
	t.Helper()
	select {
	case s := <-b.seen:
		return s
	case <-time.After(20 * time.Second):
		t.Fatal("the backend got no request")
		return hopSeen{}
	}
}

// hopClusters records the cluster names a Shadowing looks up.
type hopClusters struct {
	m     Clusters
	mu    sync.Mutex
	names []string
}

func (c *hopClusters) Get(name string) *cluster.Cluster {
	c.mu.Lock()
	c.names = append(c.names, name)
	c.mu.Unlock()
	return c.m.Get(name)
}

func (c *hopClusters) lookups() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.names...)
}

// hopShadow is a Shadowing over clusters "mirror" (the backend) and
// "empty" (no endpoint).
type hopShadow struct {
	sh *Shadowing
	cl *hopClusters
	be *hopBackend
	cm *cluster.Manager
	st *stats.Store
}

func newHopShadow(t *testing.T) *hopShadow {
	t.Helper()
	be := newHopBackend(t)
	cm, st := hopManager(t, hopStaticCluster("mirror", be.addr()), hopStaticCluster("empty"))
	cl := &hopClusters{m: cm}
	sh := NewShadowing(slog.New(slog.DiscardHandler), cl)
	t.Cleanup(sh.Close)
	return &hopShadow{sh: sh, cl: cl, be: be, cm: cm, st: st}
}

// settle waits until every shadow sent has ended (its slot is back), then
// closes the Shadowing: what was sent is then all done.
func (h *hopShadow) settle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(h.sh.slots) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("shadows still in flight")
		}
		time.Sleep(time.Millisecond)
	}
	h.sh.Close()
}
