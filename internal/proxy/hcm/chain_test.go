package hcm

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/filters/http/registry"
	routerfilter "github.com/straitmesh/strait/internal/proxy/filters/http/router"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// chainEvents records what the test filters saw, in order.
type chainEvents struct {
	mu  sync.Mutex
	log []string
}

func (e *chainEvents) add(s string) {
	e.mu.Lock()
	e.log = append(e.log, s)
	e.mu.Unlock()
}

func (e *chainEvents) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.log
	e.log = nil
	return out
}

// waitFor waits until the log holds n events (Complete runs after the
// response is written), then takes them.
func (e *chainEvents) waitFor(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		e.mu.Lock()
		got := len(e.log)
		e.mu.Unlock()
		if got >= n || time.Now().After(deadline) {
			return e.take()
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// recFactory registers a test filter named name: it adds its name to the
// request's x-chain header, answers 418 when x-stop-at names it, adds its
// name to the response's x-enc header, and logs every callback.
type recFactory struct {
	name string
	ev   *chainEvents
}

func (f recFactory) Names() []string { return []string{f.name} }
func (f recFactory) Build(_ *anypb.Any, _ httpfilter.BuildContext) (httpfilter.Filter, error) {
	return &recFilter{name: f.name, ev: f.ev}, nil
}

type recFilter struct {
	name string
	ev   *chainEvents
}

func (f *recFilter) Name() string { return f.name }

func (f *recFilter) DecodeHeaders(s httpfilter.Stream) httpfilter.Status {
	f.ev.add(f.name + ":decode")
	s.RequestHeaders().Add("x-chain", f.name)
	if v, _ := s.RequestHeaders().Lookup("x-stop-at"); v == f.name {
		s.LocalReply(418, -1, "stopped by "+f.name, "", nil)
		return httpfilter.Stop
	}
	return httpfilter.Continue
}

func (f *recFilter) EncodeHeaders(s httpfilter.Stream, status int, h httpfilter.HeaderMap) {
	f.ev.add(f.name + ":encode:" + strconv.Itoa(status))
	h.Add("x-enc", f.name)
}

func (f *recFilter) EncodeTrailers(s httpfilter.Stream, h httpfilter.HeaderMap) {
	f.ev.add(f.name + ":trailers")
	h.Add("X-Enc-Trailer", f.name)
}

func (f *recFilter) Complete(s httpfilter.Stream, info *httpfilter.StreamInfo) {
	f.ev.add(f.name + ":complete:" + strconv.Itoa(info.Status))
}

// startChainProxy serves an HCM whose http_filters are names (then the
// router), built from reg, routing / to cluster be.
func startChainProxy(t *testing.T, codec Codec, reg *registry.Registry, names []string, routes []*routev3.Route, be *clusterv3.Cluster) string {
	t.Helper()
	var list []*hcmv3.HttpFilter
	for _, n := range names {
		list = append(list, &hcmv3.HttpFilter{Name: n})
	}
	return startFilterProxy(t, codec, reg, list, routes, be)
}

// startFilterProxy is startChainProxy with the http_filters entries
// (before the router) as given.
func startFilterProxy(t *testing.T, codec Codec, reg *registry.Registry, list []*hcmv3.HttpFilter, routes []*routev3.Route, clusters ...*clusterv3.Cluster) string {
	t.Helper()
	addr, _ := startFilterProxyStats(t, codec, reg, list, routes, clusters...)
	return addr
}

// startFilterProxyStats is startFilterProxy that also returns the proxy's
// stats (the HCM's stat_prefix is "test").
func startFilterProxyStats(t *testing.T, codec Codec, reg *registry.Registry, list []*hcmv3.HttpFilter, routes []*routev3.Route, clusters ...*clusterv3.Cluster) (string, *stats.Store) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	st := stats.New()
	cm := cluster.NewManager(log, st)
	if err := cm.AddStatic(clusters); err != nil {
		t.Fatal(err)
	}
	router, _ := anypb.New(&routerv3.Router{})
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: "test",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: routes}}}},
	}
	h.HttpFilters = append(h.HttpFilters, list...)
	h.HttpFilters = append(h.HttpFilters, &hcmv3.HttpFilter{Name: routerFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}})
	f, err := BuildWith(h, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	f.UseStats(st)
	s := NewServer(Options{Logger: log, Clusters: cm, Codec: codec})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.ServeConn(c, f, netip.AddrPort{}, cluster.OriginalSource{})
		}
	}()
	t.Cleanup(func() { ln.Close(); s.Close() })
	return ln.Addr().String(), st
}

// chainClients are the downstream codecs every chain test runs on.
var chainClients = []struct {
	name   string
	client func() *http.Client
}{
	{"HTTP/1.1", func() *http.Client { return &http.Client{Transport: &http.Transport{}} }},
	{"HTTP/2", h2cClient},
}

// TestChainRunsInListOrder: the HCM runs its http_filters in list order
// on every codec: the decoders in order (the upstream sees x-chain a, b,
// c), the encoders in reverse (x-enc c, b, a), and each filter's Complete
// once when the stream has ended; a filter's local reply passes the
// encoders of the filters before it only, and the filters after it do not
// run; the router's own local reply (404 NR) passes them all.
func TestChainRunsInListOrder(t *testing.T) {
	ev := &chainEvents{}
	reg, err := registry.New(recFactory{"test.a", ev}, recFactory{"test.b", ev}, recFactory{"test.c", ev}, routerfilter.Factory{})
	if err != nil {
		t.Fatal(err)
	}
	be := headerEcho(t)
	addr := startChainProxy(t, CodecStrait, reg, []string{"test.a", "test.b", "test.c"},
		[]*routev3.Route{prefixRoute("/up", "be")}, staticCluster("be", strings.TrimPrefix(be.URL, "http://")))
	for _, cc := range chainClients {
		t.Run(cc.name, func(t *testing.T) {
			client := cc.client()
			do := func(path, stopAt string) (*http.Response, []byte) {
				req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
				if stopAt != "" {
					req.Header.Set("X-Stop-At", stopAt)
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return resp, body
			}
			ev.take()
			resp, body := do("/up", "")
			var seen http.Header
			if err := json.Unmarshal(body, &seen); err != nil {
				t.Fatalf("upstream's echo %q: %v", body, err)
			}
			if got := strings.Join(seen.Values("X-Chain"), ","); got != "test.a,test.b,test.c" {
				t.Errorf("upstream saw x-chain %q, want the list order test.a,test.b,test.c", got)
			}
			if got := strings.Join(resp.Header.Values("X-Enc"), ","); got != "test.c,test.b,test.a" {
				t.Errorf("response x-enc %q, want the encoders in reverse order", got)
			}
			want := "test.a:decode test.b:decode test.c:decode test.c:encode:200 test.b:encode:200 test.a:encode:200 test.a:complete:200 test.b:complete:200 test.c:complete:200"
			if got := strings.Join(ev.waitFor(t, 9), " "); got != want {
				t.Errorf("events\n got %s\nwant %s", got, want)
			}

			resp, body = do("/up", "test.b")
			if resp.StatusCode != 418 || string(body) != "stopped by test.b" {
				t.Errorf("stopped by test.b: %d %q", resp.StatusCode, body)
			}
			if got := strings.Join(resp.Header.Values("X-Enc"), ","); got != "test.a" {
				t.Errorf("local reply of test.b: x-enc %q, want test.a's encoder only", got)
			}
			want = "test.a:decode test.b:decode test.a:encode:418 test.a:complete:418 test.b:complete:418 test.c:complete:418"
			if got := strings.Join(ev.waitFor(t, 6), " "); got != want {
				t.Errorf("events\n got %s\nwant %s", got, want)
			}

			resp, _ = do("/none", "")
			if resp.StatusCode != 404 || strings.Join(resp.Header.Values("X-Enc"), ",") != "test.c,test.b,test.a" {
				t.Errorf("router's 404: %d x-enc %q, want every encoder", resp.StatusCode, resp.Header.Values("X-Enc"))
			}
			want = "test.a:decode test.b:decode test.c:decode test.c:encode:404 test.b:encode:404 test.a:encode:404 test.a:complete:404 test.b:complete:404 test.c:complete:404"
			if got := strings.Join(ev.waitFor(t, 9), " "); got != want {
				t.Errorf("events\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestChainCompleteOnReset: a stream the client abandons while the
// upstream has not answered still ends with one Complete per filter, on
// every codec, and no more after.
func TestChainCompleteOnReset(t *testing.T) {
	ev := &chainEvents{}
	reg, err := registry.New(recFactory{"test.a", ev}, recFactory{"test.b", ev}, routerfilter.Factory{})
	if err != nil {
		t.Fatal(err)
	}
	arrived := make(chan struct{}, 4)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done() // never answers; the proxy gives up when its client does
	}))
	t.Cleanup(be.Close)
	addr := startChainProxy(t, CodecStrait, reg, []string{"test.a", "test.b"},
		[]*routev3.Route{prefixRoute("/", "be")}, staticCluster("be", strings.TrimPrefix(be.URL, "http://")))
	for _, cc := range chainClients {
		t.Run(cc.name, func(t *testing.T) {
			ev.take()
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/slow", nil)
			done := make(chan struct{})
			go func() {
				defer close(done)
				if resp, err := cc.client().Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			select {
			case <-arrived:
			case <-time.After(5 * time.Second):
				t.Fatal("the request never reached the upstream")
			}
			cancel()
			<-done
			var completes []string
			deadline := time.Now().Add(10 * time.Second)
			for len(completes) < 2 && time.Now().Before(deadline) {
				for _, e := range ev.take() {
					if strings.Contains(e, ":complete:") {
						completes = append(completes, e)
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond) // a second Complete would come now
			for _, e := range ev.take() {
				if strings.Contains(e, ":complete:") {
					completes = append(completes, e)
				}
			}
			if len(completes) != 2 || !strings.HasPrefix(completes[0], "test.a:complete:") || !strings.HasPrefix(completes[1], "test.b:complete:") {
				t.Errorf("completes after a reset: %v, want test.a's and test.b's once each", completes)
			}
		})
	}
}

// TestChainEncodesTrailers: the response trailers an HTTP/2 upstream
// sends pass the filters' trailers encoders in reverse order. (An
// HTTP/1.1 client gets no response trailers, forward/trailers.go, so there is
// nothing to encode on that codec.)
func TestChainEncodesTrailers(t *testing.T) {
	ev := &chainEvents{}
	reg, err := registry.New(recFactory{"test.a", ev}, recFactory{"test.b", ev}, routerfilter.Factory{})
	if err != nil {
		t.Fatal(err)
	}
	be := protoBackend(t, true)
	addr := startChainProxy(t, CodecStrait, reg, []string{"test.a", "test.b"},
		[]*routev3.Route{prefixRoute("/", "be")}, h2Cluster(t, "be", strings.TrimPrefix(be.URL, "http://")))
	for _, cc := range chainClients[1:] {
		t.Run(cc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", "http://"+addr+"/t", nil)
			req.Header.Set("TE", "trailers")
			resp, err := cc.client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.ReadAll(resp.Body) // drained for the trailers; the body is not under test
			resp.Body.Close()
			if resp.Trailer.Get("X-Sum") == "" {
				t.Fatalf("the upstream's trailer did not cross: %v", resp.Trailer)
			}
			if got := strings.Join(resp.Trailer.Values("X-Enc-Trailer"), ","); got != "test.b,test.a" {
				t.Errorf("trailers x-enc-trailer %q, want test.b,test.a", got)
			}
		})
	}
}

// infoFactory registers a filter that keeps the StreamInfo of each
// stream it is told about.
type infoFactory struct {
	mu    *sync.Mutex
	infos *[]httpfilter.StreamInfo
}

func (f infoFactory) Names() []string { return []string{"test.info"} }
func (f infoFactory) Build(*anypb.Any, httpfilter.BuildContext) (httpfilter.Filter, error) {
	return infoFilter(f), nil
}

type infoFilter infoFactory

func (infoFilter) Name() string                                      { return "test.info" }
func (infoFilter) DecodeHeaders(httpfilter.Stream) httpfilter.Status { return httpfilter.Continue }
func (f infoFilter) Complete(_ httpfilter.Stream, info *httpfilter.StreamInfo) {
	f.mu.Lock()
	*f.infos = append(*f.infos, *info)
	f.mu.Unlock()
}

// TestChainStreamInfo: what a Completer is told of a stream, on every
// codec: status, cluster, upstream host, request and response body bytes,
// a duration.
func TestChainStreamInfo(t *testing.T) {
	var mu sync.Mutex
	var infos []httpfilter.StreamInfo
	reg, err := registry.New(infoFactory{&mu, &infos}, routerfilter.Factory{})
	if err != nil {
		t.Fatal(err)
	}
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)     // the request body is not under test
		_, _ = io.WriteString(w, "0123456789") // a handler's write fails only when the client has gone
	}))
	t.Cleanup(be.Close)
	beAddr := strings.TrimPrefix(be.URL, "http://")
	addr := startChainProxy(t, CodecStrait, reg, []string{"test.info"}, []*routev3.Route{prefixRoute("/", "be")}, staticCluster("be", beAddr))
	for _, cc := range chainClients {
		t.Run(cc.name, func(t *testing.T) {
			mu.Lock()
			infos = nil
			mu.Unlock()
			resp, err := cc.client().Post("http://"+addr+"/p", "text/plain", strings.NewReader("hello"))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.ReadAll(resp.Body) // drained for the trailers; the body is not under test
			resp.Body.Close()
			deadline := time.Now().Add(5 * time.Second)
			for {
				mu.Lock()
				n := len(infos)
				mu.Unlock()
				if n > 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(infos) != 1 {
				t.Fatalf("%d Completes, want 1", len(infos))
			}
			in := infos[0]
			if in.Status != 200 || in.Cluster != "be" || in.UpstreamHost.String() != beAddr || in.BytesIn != 5 || in.BytesOut != 10 || in.Duration <= 0 || in.GRPCStatus != -1 {
				t.Errorf("StreamInfo %+v", in)
			}
		})
	}
}

// TestChainEndsInTheRouter: the router is built through the registry as
// the chain's terminal filter; a list with the router before its end is
// refused (Envoy: the terminal filter must be the last), and so is a
// registry without the router.
func TestChainEndsInTheRouter(t *testing.T) {
	ev := &chainEvents{}
	hcm := func(names ...string) *hcmv3.HttpConnectionManager {
		h := &hcmv3.HttpConnectionManager{StatPrefix: "test",
			RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "r"}}}
		for _, n := range names {
			h.HttpFilters = append(h.HttpFilters, &hcmv3.HttpFilter{Name: n})
		}
		return h
	}
	reg, err := registry.New(recFactory{"test.a", ev}, routerfilter.Factory{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := BuildWith(hcm("test.a", routerFilter), nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	if f.chain.router == nil || f.chain.router.Name() != routerFilter || len(f.chain.filters) != 1 {
		t.Errorf("chain: router %v, %d decoders; want the router after test.a", f.chain.router, len(f.chain.filters))
	}
	if _, err := BuildWith(hcm(routerFilter, "test.a", routerFilter), nil, reg); err == nil || !strings.Contains(err.Error(), "terminal filter must be the last") {
		t.Errorf("router first: %v, want it refused as a terminal filter before the end", err)
	}
	noRouter, err := registry.New(recFactory{"test.a", ev})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := BuildWith(hcm("test.a", routerFilter), nil, noRouter); err == nil || !strings.Contains(err.Error(), routerFilter) {
		t.Errorf("no router in the registry: %v, want an error naming %s", err, routerFilter)
	}
}
