package tracing

import (
	"net/netip"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/httpfilter/streamtest"
)

// recorder is a Reporter that keeps the spans (unit tests only; the
// reporters are tested against a real collector in reporter_test.go).
type recorder struct {
	mu    sync.Mutex
	spans []*Span
}

func (r *recorder) Report(sp *Span) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, sp)
}

func tagOf(sp *Span, key string) (string, bool) {
	for _, t := range sp.Tags {
		if t.Key == key {
			return t.Value, true
		}
	}
	return "", false
}

func newTestFilter(t *testing.T, cfg *Config, dir corev3.TrafficDirection) (*Filter, *recorder) {
	t.Helper()
	rec := &recorder{}
	f, err := NewFilter(FilterOptions{Config: cfg, Reporter: rec, Direction: dir,
		Node: &corev3.Node{Id: "sidecar~10.0.0.1~pod.ns~ns.svc.cluster.local", Cluster: "app.ns"}})
	if err != nil {
		t.Fatal(err)
	}
	return f, rec
}

func zipkinConfig(random uint32) *Config {
	return &Config{Sampling: Sampling{Client: 10000, Random: random, Overall: 10000}, RequestID: DefaultRequestID, MaxPathTagLength: 256,
		Provider: Provider{Kind: KindZipkin, Cluster: "zipkin", Host: "zipkin", Path: "/api/v2/spans", TraceID128: true},
		CustomTags: []CustomTag{{Tag: "lit", Kind: TagLiteral, Value: "v"}, {Tag: "team", Kind: TagRequestHeader, Name: "x-team", Default: "none", HasDefault: true},
			{Tag: "policy", Kind: TagMetadata, Name: "envoy.filters.http.rbac", Key: "shadow_id"}}}
}

func run(f *Filter, s *streamtest.Stream, info httpfilter.StreamInfo) {
	f.DecodeHeaders(s)
	f.Complete(s, &info)
}

func TestFilterNewTrace(t *testing.T) {
	f, rec := newTestFilter(t, zipkinConfig(10000), corev3.TrafficDirection_INBOUND)
	s := streamtest.New("svc.ns:8080", "/a", streamtest.NewHeaders("user-agent", "curl"))
	s.QueryV, s.Remote = "b=1", netip.MustParseAddr("10.0.0.9")
	s.MD.Set("envoy.filters.http.rbac", "shadow_id", "ns-policy")
	run(f, s, httpfilter.StreamInfo{Status: 503, Cluster: "inbound|8080||", Flags: "UF", BytesOut: 7})
	h := s.Request
	rid, _ := h.Lookup("x-request-id")
	if len(rid) != 36 || rid[14] != '9' {
		t.Errorf("x-request-id %q: want a UUID with the sampled reason packed", rid)
	}
	tid, _ := h.Lookup("x-b3-traceid")
	sid, _ := h.Lookup("x-b3-spanid")
	sampled, _ := h.Lookup("x-b3-sampled")
	if len(tid) != 32 || len(sid) != 16 || sampled != "1" {
		t.Errorf("upstream context %q %q %q", tid, sid, sampled)
	}
	if _, ok := h.Lookup("x-b3-parentspanid"); ok {
		t.Error("a root span has no parent")
	}
	if len(rec.spans) != 1 {
		t.Fatalf("%d spans", len(rec.spans))
	}
	sp := rec.spans[0]
	if string(sp.TraceID.AppendHex(nil, true)) != tid || hex64(sp.ID) != sid || sp.ParentID != 0 || sp.Kind != KindServer || sp.Name != "ingress" || sp.Service != "app.ns" {
		t.Errorf("span %+v", sp)
	}
	for k, v := range map[string]string{"component": "proxy", "http.url": "http://svc.ns:8080/a?b=1", "http.method": "GET", "http.status_code": "503",
		"upstream_cluster": "inbound|8080||", "response_flags": "UF", "error": "true", "node_id": "sidecar~10.0.0.1~pod.ns~ns.svc.cluster.local",
		"guid:x-request-id": rid, "user_agent": "curl", "peer.address": "10.0.0.9", "response_size": "7", "lit": "v", "team": "none", "policy": "ns-policy"} {
		if got, ok := tagOf(sp, k); !ok || got != v {
			t.Errorf("tag %s = %q (%v), want %q", k, got, ok, v)
		}
	}
}

// TestFilterChildOfIncoming: an outbound (CLIENT) span is a child of the
// app's context, and the upstream gets the proxy's own span id.
func TestFilterChildOfIncoming(t *testing.T) {
	f, rec := newTestFilter(t, zipkinConfig(0), corev3.TrafficDirection_OUTBOUND)
	s := streamtest.New("next:80", "/", streamtest.NewHeaders("x-b3-traceid", "463ac35c9f6413ad48485a3953bb6124", "x-b3-spanid", "a2fb4a1d1a96d312",
		"x-b3-parentspanid", "0000000000000005", "x-b3-sampled", "1", "x-request-id", "00000064-0000-4000-8000-000000000000"))
	run(f, s, httpfilter.StreamInfo{Status: 200})
	if len(rec.spans) != 1 {
		t.Fatalf("%d spans: the incoming sampled flag must win over random_sampling 0", len(rec.spans))
	}
	sp := rec.spans[0]
	if sp.Kind != KindClient || sp.Name != "egress next:80" || sp.ParentID != 0xa2fb4a1d1a96d312 || sp.ID == 0xa2fb4a1d1a96d312 || sp.Shared {
		t.Errorf("span %+v", sp)
	}
	h := s.Request
	if v, _ := h.Lookup("x-b3-traceid"); v != "463ac35c9f6413ad48485a3953bb6124" {
		t.Errorf("trace id %q", v)
	}
	if v, _ := h.Lookup("x-b3-spanid"); v != hex64(sp.ID) {
		t.Errorf("span id %q, want the proxy's %x", v, sp.ID)
	}
	if v, _ := h.Lookup("x-b3-parentspanid"); v != "a2fb4a1d1a96d312" {
		t.Errorf("parent %q", v)
	}
	if _, ok := tagOf(sp, "error"); ok {
		t.Error("a 200 is no error")
	}
	if v, _ := h.Lookup("x-request-id"); v != "00000064-0000-4000-8000-000000000000" {
		t.Errorf("x-request-id %q changed (not traced by this hop's decision, so no reason packed)", v)
	}
}

func TestFilterIncomingNotSampledWins(t *testing.T) {
	f, rec := newTestFilter(t, zipkinConfig(10000), corev3.TrafficDirection_INBOUND)
	s := streamtest.New("svc", "/", streamtest.NewHeaders("b3", "0"))
	run(f, s, httpfilter.StreamInfo{Status: 200})
	if len(rec.spans) != 0 {
		t.Fatal("b3: 0 must win over random_sampling 100 %")
	}
	if v, _ := s.Request.Lookup("x-b3-sampled"); v != "0" {
		t.Errorf("x-b3-sampled %q: the decision is propagated", v)
	}
}

func TestFilterSharedSpanContext(t *testing.T) {
	cfg := zipkinConfig(10000)
	cfg.Provider.SharedSpanContext = true
	f, rec := newTestFilter(t, cfg, corev3.TrafficDirection_INBOUND)
	s := streamtest.New("svc", "/", streamtest.NewHeaders("x-b3-traceid", "0000000000000001", "x-b3-spanid", "0000000000000002", "x-b3-parentspanid", "0000000000000003"))
	run(f, s, httpfilter.StreamInfo{Status: 200})
	if len(rec.spans) != 1 {
		t.Fatal("no span")
	}
	if sp := rec.spans[0]; sp.ID != 2 || sp.ParentID != 3 || !sp.Shared {
		t.Errorf("shared span %+v: want the client's id and parent", sp)
	}
}

func TestFilterW3C(t *testing.T) {
	cfg := zipkinConfig(10000)
	cfg.Provider = Provider{Kind: KindOTLP, Cluster: "otel", Host: "otel"}
	f, rec := newTestFilter(t, cfg, corev3.TrafficDirection_INBOUND)
	s := streamtest.New("svc", "/", streamtest.NewHeaders("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate", "a=b",
		"x-b3-traceid", "0000000000000001", "x-b3-spanid", "0000000000000002"))
	run(f, s, httpfilter.StreamInfo{Status: 200})
	if len(rec.spans) != 1 {
		t.Fatal("no span")
	}
	sp := rec.spans[0]
	if sp.TraceID != (TraceID{0x4bf92f3577b34da6, 0xa3ce929d0e0e4736}) || sp.ParentID != 0x00f067aa0ba902b7 {
		t.Errorf("span %+v: OpenTelemetry reads traceparent, not B3", sp)
	}
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + hex64(sp.ID) + "-01"
	if v, _ := s.Request.Lookup("traceparent"); v != want {
		t.Errorf("traceparent %q, want %q", v, want)
	}
	if v, _ := s.Request.Lookup("tracestate"); v != "a=b" {
		t.Errorf("tracestate %q", v)
	}
}

func TestFilterInvalidContextTracesNothing(t *testing.T) {
	f, rec := newTestFilter(t, zipkinConfig(10000), corev3.TrafficDirection_INBOUND)
	s := streamtest.New("svc", "/", streamtest.NewHeaders("x-b3-traceid", "nothex"))
	run(f, s, httpfilter.StreamInfo{Status: 200})
	if len(rec.spans) != 0 {
		t.Error("a malformed context is not traced (Envoy's NullSpan)")
	}
	if _, ok := s.Request.Lookup("x-b3-spanid"); ok {
		t.Error("nothing is injected for a malformed context")
	}
	if _, ok := s.Request.Lookup("x-request-id"); !ok {
		t.Error("x-request-id is still generated")
	}
}

func TestFilterKeepsRequestID(t *testing.T) {
	cfg := zipkinConfig(0)
	f, _ := newTestFilter(t, cfg, corev3.TrafficDirection_INBOUND)
	s := streamtest.New("svc", "/", streamtest.NewHeaders("x-request-id", "my-own-id"))
	run(f, s, httpfilter.StreamInfo{Status: 200})
	if v, _ := s.Request.Lookup("x-request-id"); v != "my-own-id" {
		t.Errorf("x-request-id %q, want the client's kept", v)
	}
}

// TestFilterDecorator: an egress span takes the route's decorator
// operation as its name and sends it upstream; an ingress span takes the
// name from x-envoy-decorator-operation, which goes no further.
func TestFilterDecorator(t *testing.T) {
	out, rec := newTestFilter(t, zipkinConfig(10000), corev3.TrafficDirection_OUTBOUND)
	s := streamtest.New("web.app:80", "/", nil)
	s.RouteV = &streamtest.Route{RouteName: "r", ClusterName: "web", Operation: "web.app.svc.cluster.local:80/*"}
	run(out, s, httpfilter.StreamInfo{Status: 200})
	if v, _ := s.Request.Lookup("x-envoy-decorator-operation"); v != "web.app.svc.cluster.local:80/*" {
		t.Errorf("x-envoy-decorator-operation %q", v)
	}
	if len(rec.spans) != 1 || rec.spans[0].Name != "web.app.svc.cluster.local:80/*" {
		t.Fatalf("egress spans %+v", rec.spans)
	}
	in, rec := newTestFilter(t, zipkinConfig(10000), corev3.TrafficDirection_INBOUND)
	s = streamtest.New("web.app:80", "/", streamtest.NewHeaders("x-envoy-decorator-operation", "from-client"))
	run(in, s, httpfilter.StreamInfo{Status: 200})
	if _, ok := s.Request.Lookup("x-envoy-decorator-operation"); ok {
		t.Error("the ingress sidecar passed x-envoy-decorator-operation to the app")
	}
	if len(rec.spans) != 1 || rec.spans[0].Name != "from-client" {
		t.Fatalf("ingress spans %+v", rec.spans)
	}
}
