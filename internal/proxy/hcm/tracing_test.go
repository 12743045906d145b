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
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	uuidv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/request_id/uuid/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/proxy/tracing"
)

// zipkinCollector is a real HTTP server taking Zipkin v2 JSON on
// /api/v2/spans.
func zipkinCollector(t testing.TB) (string, chan tracing.ZipkinSpan) {
	spans := make(chan tracing.ZipkinSpan, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var got []tracing.ZipkinSpan
		if r.URL.Path != "/api/v2/spans" || json.NewDecoder(r.Body).Decode(&got) != nil {
			http.Error(w, "bad", 400)
			return
		}
		for _, s := range got {
			spans <- s
		}
		w.WriteHeader(202)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), spans
}

// headerBackend answers 200 and sends each request's headers on seen.
func headerBackend(t testing.TB) (string, chan http.Header) {
	seen := make(chan http.Header, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		_, _ = io.WriteString(w, "ok") // the client's read shows a failed write
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), seen
}

// withZipkin sets the HCM's tracing as istiod writes it for a Zipkin
// provider, sampling percent, and its UUID request id extension.
func withZipkin(t testing.TB, percent float64) func(*hcmv3.HttpConnectionManager) {
	return func(h *hcmv3.HttpConnectionManager) {
		h.Tracing = &hcmv3.HttpConnectionManager_Tracing{
			ClientSampling: &typev3.Percent{Value: 100}, RandomSampling: &typev3.Percent{Value: percent}, OverallSampling: &typev3.Percent{Value: 100},
			Provider: &tracev3.Tracing_Http{Name: tracing.ZipkinName, ConfigType: &tracev3.Tracing_Http_TypedConfig{TypedConfig: mustAnyT(t, &tracev3.ZipkinConfig{
				CollectorCluster: "zipkin", CollectorEndpoint: "/api/v2/spans", CollectorHostname: "zipkin.istio-system:9411",
				CollectorEndpointVersion: tracev3.ZipkinConfig_HTTP_JSON, TraceId_128Bit: true, SharedSpanContext: wrapperspb.Bool(false),
			})}},
		}
		h.RequestIdExtension = &hcmv3.RequestIDExtension{TypedConfig: mustAnyT(t, &uuidv3.UuidRequestIdConfig{UseRequestIdForTraceSampling: wrapperspb.Bool(true)})}
	}
}

// startTracedProxy serves an HCM modified by mod, on an OUTBOUND
// listener, with the proxy's span reporters dialing its clusters.
func startTracedProxy(t testing.TB, mod func(*hcmv3.HttpConnectionManager), clusters ...*clusterv3.Cluster) (string, *tracing.Reporters) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	st := stats.New()
	cm := cluster.NewManager(log, st)
	if err := cm.AddStatic(clusters); err != nil {
		t.Fatal(err)
	}
	reps := tracing.NewReporters(tracing.ReportersOptions{Logger: log, FlushInterval: 20 * time.Millisecond,
		Dial: func(ctx context.Context, name string) (net.Conn, error) {
			c := cm.Get(name)
			ep, err := c.Pick(netip.AddrPort{})
			if err != nil {
				return nil, err
			}
			return c.Dial(ctx, ep)
		}})
	router, _ := anypb.New(&routerv3.Router{})
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: "test",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{prefixRoute("/", "be")}}}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: routerFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	}
	mod(h)
	f, err := Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.UseNode(&corev3.Node{Id: "sidecar~10.1.1.1~client.ns~ns.svc.cluster.local", Cluster: "client.ns"}, corev3.TrafficDirection_OUTBOUND)
	if err := f.UseTracing(reps); err != nil {
		t.Fatal(err)
	}
	f.UseStats(st)
	s := NewServer(Options{Logger: log, Clusters: cm, Codec: CodecStrait})
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
	t.Cleanup(func() { ln.Close(); s.Close(); reps.Close() })
	return ln.Addr().String(), reps
}

// TestTracingThroughHCM: on both codecs, a request with the app's B3
// context leaves the proxy with the same trace id, the proxy's own span
// id and the app's span as parent, and the collector gets the proxy's
// CLIENT span with those ids and Envoy's tags once the stream completes.
func TestTracingThroughHCM(t *testing.T) {
	zAddr, spans := zipkinCollector(t)
	beAddr, seen := headerBackend(t)
	addr, _ := startTracedProxy(t, withZipkin(t, 0), staticCluster("be", beAddr), staticCluster("zipkin", zAddr))
	for _, cl := range []struct {
		name string
		c    *http.Client
	}{{"http1", &http.Client{Timeout: 10 * time.Second}}, {"h2c", h2cClient()}} {
		t.Run(cl.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", "http://"+addr+"/p?q=1", nil)
			req.Host = "next.ns:8080"
			req.Header.Set("x-b3-traceid", "463ac35c9f6413ad48485a3953bb6124")
			req.Header.Set("x-b3-spanid", "a2fb4a1d1a96d312")
			req.Header.Set("x-b3-sampled", "1")
			resp, err := cl.c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			up := <-seen
			if up.Get("X-B3-Traceid") != "463ac35c9f6413ad48485a3953bb6124" || up.Get("X-B3-Parentspanid") != "a2fb4a1d1a96d312" || up.Get("X-B3-Sampled") != "1" {
				t.Errorf("upstream context %v", up)
			}
			sid := up.Get("X-B3-Spanid")
			if sid == "" || sid == "a2fb4a1d1a96d312" {
				t.Errorf("upstream span id %q: want the proxy's own", sid)
			}
			if rid := up.Get("X-Request-Id"); len(rid) != 36 {
				t.Errorf("x-request-id %q", rid)
			}
			select {
			case sp := <-spans:
				if sp.TraceID != "463ac35c9f6413ad48485a3953bb6124" || sp.ID != sid || sp.ParentID != "a2fb4a1d1a96d312" || sp.Kind != "CLIENT" ||
					sp.Name != "egress next.ns:8080" || sp.LocalEndpoint == nil || sp.LocalEndpoint.ServiceName != "client.ns" {
					t.Errorf("span %+v", sp)
				}
				for k, v := range map[string]string{"http.status_code": "200", "upstream_cluster": "be", "http.method": "GET",
					"http.url": "http://next.ns:8080/p?q=1", "component": "proxy", "response_flags": "-",
					"guid:x-request-id": up.Get("X-Request-Id"), "node_id": "sidecar~10.1.1.1~client.ns~ns.svc.cluster.local"} {
					if sp.Tags[k] != v {
						t.Errorf("tag %s = %q, want %q", k, sp.Tags[k], v)
					}
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no span reached the collector")
			}
		})
	}
}

// TestTracingSamplingAndRequestID: at 100 % a request without context
// starts a trace (128-bit id, the sampled reason packed in the generated
// x-request-id); at 0 % nothing is reported but the decision and the
// context still go upstream; a client's x-request-id is kept.
func TestTracingSamplingAndRequestID(t *testing.T) {
	zAddr, spans := zipkinCollector(t)
	beAddr, seen := headerBackend(t)
	on, _ := startTracedProxy(t, withZipkin(t, 100), staticCluster("be", beAddr), staticCluster("zipkin", zAddr))
	off, reps := startTracedProxy(t, withZipkin(t, 0), staticCluster("be", beAddr), staticCluster("zipkin", zAddr))
	c := &http.Client{Timeout: 10 * time.Second}
	get := func(addr string, hdr ...string) http.Header {
		req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
		for i := 0; i < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return <-seen
	}
	up := get(on)
	if rid := up.Get("X-Request-Id"); len(rid) != 36 || rid[14] != '9' {
		t.Errorf("x-request-id %q: want a UUID with the sampled reason", rid)
	}
	if tid := up.Get("X-B3-Traceid"); len(tid) != 32 || up.Get("X-B3-Sampled") != "1" || up.Get("X-B3-Parentspanid") != "" {
		t.Errorf("new trace context %v", up)
	}
	select {
	case sp := <-spans:
		if sp.TraceID != up.Get("X-B3-Traceid") || sp.ParentID != "" {
			t.Errorf("root span %+v", sp)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no span at 100 %")
	}
	up = get(off)
	if up.Get("X-B3-Sampled") != "0" || up.Get("X-B3-Traceid") == "" {
		t.Errorf("unsampled context %v: the decision still propagates", up)
	}
	if up = get(off, "X-Request-Id", "client-chosen"); up.Get("X-Request-Id") != "client-chosen" {
		t.Errorf("x-request-id %q, want the client's kept", up.Get("X-Request-Id"))
	}
	select {
	case sp := <-spans:
		t.Errorf("a span at 0 %%: %+v", sp)
	case <-time.After(200 * time.Millisecond):
	}
	if s := reps.Stats(); s.Sent != 0 {
		t.Errorf("stats %+v at 0 %%", s)
	}
}

// TestTracingRefusedByName: what the tracing does not implement is
// refused when the HCM is built.
func TestTracingRefusedByName(t *testing.T) {
	h := xffHCM(t, withZipkin(t, 1))
	h.Tracing.Verbose = true
	if _, err := Build(h, nil); err == nil || !strings.Contains(err.Error(), "tracing.verbose") {
		t.Errorf("Build error %v, want one naming tracing.verbose", err)
	}
	h = xffHCM(t, withZipkin(t, 1))
	f, err := Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.UseTracing(nil); err == nil {
		t.Error("tracing without the proxy's reporters was accepted")
	}
}
