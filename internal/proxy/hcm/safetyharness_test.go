package hcm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/nginxtest"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/testreq"
)

// This file is the harness of safety_test.go: the proxies under test
// (strait's HCM, and nginx as a reference), scripted raw-socket backends,
// leak counting and raw exchanges.

// proxyConfig is what a test proxy is started with.
type proxyConfig struct {
	limits       *Limits       // nil: Envoy's defaults
	routeTimeout time.Duration // 0: none (Istio's 0s)
	routeIdle    time.Duration // the route's idle_timeout; 0: unset
}

// startStrait runs the strait codec's HCM on loopback in front of beAddr.
func startStrait(t testing.TB, beAddr string, pc proxyConfig) string {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	cm := cluster.NewManager(log, stats.New())
	if err := cm.AddStatic([]*clusterv3.Cluster{staticCluster("be", beAddr)}); err != nil {
		t.Fatal(err)
	}
	action := &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "be"},
		Timeout:          durationpb.New(pc.routeTimeout)}
	if pc.routeIdle > 0 {
		action.IdleTimeout = durationpb.New(pc.routeIdle)
	}
	table, err := route.Compile(&routev3.RouteConfiguration{Name: "r", VirtualHosts: []*routev3.VirtualHost{{
		Name: "all", Domains: []string{"*"},
		Routes: []*routev3.Route{{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: action}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Options{Logger: log, Clusters: cm})
	// accept_http_10, as net/http (the reference the harness compares
	// with) serves HTTP/1.0; its refusal is TestHTTP10UpgradeRequired's.
	f := &Filter{StatPrefix: "test", inline: table, Limits: DefaultLimits(), acceptHTTP10: true}
	if pc.limits != nil {
		f.Limits = *pc.limits
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.ServeConn(c, f, netip.AddrPort{}, cluster.OriginalSource{})
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		s.Close()
	})
	return ln.Addr().String()
}

// nginxProxy is the nginx reference: a keep-alive upstream pool in front of
// beAddr, like ours. extra goes in the server block.
func nginxProxy(t testing.TB, beAddr, extra string) string {
	return nginxtest.Start(t, fmt.Sprintf(`
upstream be { server %s; keepalive 8; }
server {
	listen LISTEN;
	%s
	location / {
		proxy_pass http://be;
		proxy_http_version 1.1;
		proxy_set_header Connection "";
		proxy_set_header Host $http_host;
	}
}`, beAddr, extra))
}

type target struct{ name, addr string }

// targets returns strait-proxy, and nginx (when installed and nginxOK) as the
// reference, in front of beAddr.
func targets(t *testing.T, beAddr string, pc proxyConfig, nginxExtra string, nginxOK bool) []target {
	ts := []target{{"strait", startStrait(t, beAddr, pc)}}
	switch {
	case !nginxOK:
	case nginxInstalled():
		ts = append(ts, target{"nginx", nginxProxy(t, beAddr, nginxExtra)})
	case testreq.RequireAll():
		t.Fatalf("nginx, the reference, is not installed (apt-get install nginx-light; %s is set)", testreq.EnvRequireAll)
	}
	return ts
}

func nginxInstalled() bool {
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return true
	}
	_, err := exec.LookPath("nginx")
	return err == nil
}

// scriptBackend is a raw HTTP/1.1 backend: for each request head it calls
// handle, which answers with raw bytes (the body, if any, is left to it)
// and reports whether to keep the connection.
type scriptBackend struct {
	addr      string
	inRequest atomic.Int64 // connections inside handle
	requests  sync.Map     // path -> *atomic.Int64
	wg        sync.WaitGroup
}

type beReq struct {
	c    net.Conn
	r    *http1.Reader
	req  *http1.Request
	path string
}

func (b *beReq) write(s string) { _, _ = io.WriteString(b.c, s) } // a failed write shows in what the test reads back

// body reads the request body (Content-Length or chunked).
func (b *beReq) body() ([]byte, error) {
	switch b.req.Framing {
	case http1.FramingLength:
		return io.ReadAll(&http1.LengthReader{R: b.r, Left: b.req.ContentLength})
	case http1.FramingChunked:
		var cr http1.ChunkedReader
		cr.Reset(b.r)
		return io.ReadAll(&cr)
	}
	return nil, nil
}

func (b *beReq) header(name string) string {
	v, _ := b.req.Headers.Get(name)
	return string(v)
}

func newScriptBackend(t testing.TB, handle func(b *beReq) bool) *scriptBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sb := &scriptBackend{addr: ln.Addr().String()}
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	sb.wg.Add(1)
	go func() {
		defer sb.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			sb.wg.Add(1)
			go func() {
				defer sb.wg.Done()
				defer func() { mu.Lock(); delete(conns, c); mu.Unlock(); c.Close() }()
				r := http1.NewReader(c)
				defer r.Release()
				var req http1.Request
				for {
					head, err := r.ReadHead(http1.DefaultMaxHeadBytes)
					if err != nil || http1.ParseRequest(head, &req) != nil {
						return
					}
					path := string(req.Path)
					n, _ := sb.requests.LoadOrStore(path, new(atomic.Int64))
					n.(*atomic.Int64).Add(1)
					sb.inRequest.Add(1)
					keep := handle(&beReq{c: c, r: r, req: &req, path: path})
					sb.inRequest.Add(-1)
					if !keep {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		sb.wg.Wait()
	})
	return sb
}

func (sb *scriptBackend) count(path string) int64 {
	if n, ok := sb.requests.Load(path); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

// waitFor polls cond for up to 5 s.
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func countFDs() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}

// noLeaks records the goroutine and fd counts and, when the returned func
// runs, checks (waiting up to 5 s) that they came back down.
func noLeaks(t *testing.T) func() {
	// The codec's coarse clock runs one goroutine for the process from its
	// first use on: start it now, so that it is not counted as a leak of
	// the first test to make a request.
	http1.CoarseNow()
	g0, f0 := runtime.NumGoroutine(), countFDs()
	return func() {
		t.Helper()
		if !waitFor(func() bool { return runtime.NumGoroutine() <= g0 && countFDs() <= f0 }) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("leak: goroutines %d -> %d, fds %d -> %d\n%s", g0, runtime.NumGoroutine(), f0, countFDs(), buf)
		}
	}
}

// exchange writes raw to addr and reads one response (nil and the error
// if there is none), leaving the connection open for the caller.
func exchange(t *testing.T, addr, raw string) (*http.Response, string, net.Conn, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		return nil, "", c, err
	}
	resp, body, err := readResp(c, bufio.NewReader(c))
	return resp, body, c, err
}

func readResp(c net.Conn, br *bufio.Reader) (*http.Response, string, error) {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}

// closedSoon reports whether the peer closes c (EOF or reset) within 5 s,
// draining what it sends.
func closedSoon(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, c)
	return err == nil || !errors.Is(err, os.ErrDeadlineExceeded)
}
