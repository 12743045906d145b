package metadataexchange

import (
	"os"
	"strings"
	"testing"

	udpav1 "github.com/cncf/xds/go/udpa/type/v1"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/httpfilter/streamtest"
	"github.com/straitmesh/strait/internal/proxy/peermeta"
)

// typedStruct wraps fields as Istio's protoconv.TypedStructWithFields does.
func typedStruct(t *testing.T, typeURL string, fields map[string]any) *anypb.Any {
	t.Helper()
	v, err := structpb.NewStruct(fields)
	if err != nil {
		t.Fatal(err)
	}
	a, err := anypb.New(&udpav1.TypedStruct{TypeUrl: typeURL, Value: v})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The configs istiod writes (pilot/pkg/xds/filters: SidecarInboundMetadataFilter,
// SidecarOutboundMetadataFilter, SidecarOutboundMetadataFilterSkipHeaders).
func inboundConfig(t *testing.T) *anypb.Any {
	return typedStruct(t, TypeURL, map[string]any{
		"downstream_discovery":   []any{map[string]any{"istio_headers": map[string]any{}}, map[string]any{"workload_discovery": map[string]any{}}},
		"downstream_propagation": []any{map[string]any{"istio_headers": map[string]any{}}},
	})
}

func outboundConfig(t *testing.T) *anypb.Any {
	return typedStruct(t, TypeURL, map[string]any{
		"upstream_discovery":   []any{map[string]any{"istio_headers": map[string]any{}}, map[string]any{"workload_discovery": map[string]any{}}},
		"upstream_propagation": []any{map[string]any{"istio_headers": map[string]any{}}},
	})
}

var ratingsNode = &corev3.Node{Id: "sidecar~10.0.0.2~ratings-v1-1.default~default.svc.cluster.local", Metadata: mustStruct(map[string]any{
	"NAMESPACE": "default", "WORKLOAD_NAME": "ratings-v1", "CLUSTER_ID": "server-cluster", "NAME": "ratings-v1-1",
	"LABELS":        map[string]any{"app": "ratings", "version": "v1", "service.istio.io/canonical-name": "ratings"},
	"ISTIO_VERSION": "1.28.0", "MESH_ID": "cluster.local",
})}

func mustStruct(m map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(m)
	if err != nil {
		panic(err)
	}
	return s
}

func istioHeader(t *testing.T) string {
	b, err := os.ReadFile("../../../peermeta/testdata/istio_header.txt")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func build(t *testing.T, cfg *anypb.Any) *Filter {
	t.Helper()
	f, err := Factory{}.Build(cfg, httpfilter.BuildContext{Node: ratingsNode})
	if err != nil {
		t.Fatal(err)
	}
	return f.(*Filter)
}

func TestParseRefuses(t *testing.T) {
	for name, cfg := range map[string]*anypb.Any{
		"skip_external_clusters": typedStruct(t, TypeURL, map[string]any{
			"upstream_propagation": []any{map[string]any{"istio_headers": map[string]any{"skip_external_clusters": true}}}}),
		"unknown field":     typedStruct(t, TypeURL, map[string]any{"frobnicate": true}),
		"unknown method":    typedStruct(t, TypeURL, map[string]any{"downstream_discovery": []any{map[string]any{"baggage": map[string]any{}}}}),
		"additional labels": typedStruct(t, TypeURL, map[string]any{"additional_labels": []any{"team"}}),
		"shared":            typedStruct(t, TypeURL, map[string]any{"shared_with_upstream": true}),
		"other type":        typedStruct(t, "type.googleapis.com/other", nil),
	} {
		if _, err := Parse(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	c, err := Parse(typedStruct(t, TypeURL, map[string]any{
		"upstream_propagation": []any{map[string]any{"istio_headers": map[string]any{"skip_external_clusters": false}}}}))
	if err != nil || !c.UpstreamPropagation {
		t.Errorf("skip_external_clusters false: %+v %v", c, err)
	}
}

// Inbound: the client sidecar's headers (Istio's own bytes) are read,
// removed before the app, and answered with ours in the response.
func TestInbound(t *testing.T) {
	f := build(t, inboundConfig(t))
	s := streamtest.New("ratings:9080", "/", streamtest.NewHeaders(
		peermeta.HeaderMetadataID, "client-id", peermeta.HeaderMetadata, istioHeader(t), "x-app", "1"))
	if f.DecodeHeaders(s) != httpfilter.Continue {
		t.Fatal("stopped")
	}
	if len(s.Request.Fields) != 1 || s.Request.Fields[0][0] != "x-app" {
		t.Errorf("request headers to the app: %v", s.Request.Fields)
	}
	p := PeerOf(s.Metadata(), DownstreamPeer)
	if p == nil || p.Workload != "productpage-v1" || p.Namespace != "default" || p.CanonicalService != "productpage-v1" {
		t.Fatalf("peer %+v", p)
	}
	resp := streamtest.NewHeaders("content-type", "text/plain")
	f.EncodeHeaders(s, 200, resp)
	id, _ := resp.Lookup(peermeta.HeaderMetadataID)
	md, _ := resp.Lookup(peermeta.HeaderMetadata)
	w, err := peermeta.DecodeHeader(md)
	if id != ratingsNode.Id || err != nil || w.Workload != "ratings-v1" || w.App != "ratings" || w.Cluster != "server-cluster" {
		t.Errorf("response exchange: %q %+v %v", id, w, err)
	}

	// A request without the exchange gets none back (Istio's
	// DownstreamMXPropagation); one with only the id header gets only
	// ours (istio/proxy's HTTP exchange test); a garbled header is
	// stripped and leaves the peer unknown, and is answered.
	s = streamtest.New("ratings:9080", "/", nil)
	f.DecodeHeaders(s)
	resp = streamtest.NewHeaders()
	f.EncodeHeaders(s, 200, resp)
	if len(resp.Fields) != 0 {
		t.Errorf("no exchange, response %v", resp.Fields)
	}
	s = streamtest.New("ratings:9080", "/", streamtest.NewHeaders(peermeta.HeaderMetadataID, "client"))
	f.DecodeHeaders(s)
	resp = streamtest.NewHeaders()
	f.EncodeHeaders(s, 200, resp)
	if id, _ := resp.Lookup(peermeta.HeaderMetadataID); len(resp.Fields) != 1 || id != ratingsNode.Id {
		t.Errorf("id only, response %v", resp.Fields)
	}
	s = streamtest.New("ratings:9080", "/", streamtest.NewHeaders(peermeta.HeaderMetadata, "%%%"))
	f.DecodeHeaders(s)
	resp = streamtest.NewHeaders()
	f.EncodeHeaders(s, 200, resp)
	if len(s.Request.Fields) != 0 || len(resp.Fields) != 1 || PeerOf(s.Metadata(), DownstreamPeer) != nil {
		t.Errorf("request %v response %v", s.Request.Fields, resp.Fields)
	}
}

// Outbound: ours go to the upstream (replacing what the app sent), the
// server's are read from the response and removed before the client.
func TestOutbound(t *testing.T) {
	f := build(t, outboundConfig(t))
	s := streamtest.New("productpage:9080", "/", streamtest.NewHeaders(peermeta.HeaderMetadataID, "forged"))
	f.DecodeHeaders(s)
	id, _ := s.Request.Lookup(peermeta.HeaderMetadataID)
	md, _ := s.Request.Lookup(peermeta.HeaderMetadata)
	if w, err := peermeta.DecodeHeader(md); id != ratingsNode.Id || err != nil || w.Workload != "ratings-v1" {
		t.Errorf("request exchange: %q %+v %v", id, w, err)
	}
	resp := streamtest.NewHeaders(peermeta.HeaderMetadataID, "server-id", peermeta.HeaderMetadata, istioHeader(t), "content-length", "0")
	f.EncodeHeaders(s, 200, resp)
	if len(resp.Fields) != 1 {
		t.Errorf("response to the client: %v", resp.Fields)
	}
	if p := PeerOf(s.Metadata(), UpstreamPeer); p == nil || p.Workload != "productpage-v1" {
		t.Errorf("upstream peer %+v", p)
	}
}

// The decoded-header cache stays bounded whatever peers send.
func TestCacheBounded(t *testing.T) {
	f := build(t, inboundConfig(t))
	for i := range 3 * maxCache {
		w := peermeta.Workload{Workload: strings.Repeat("x", i%50), Namespace: string(rune('a' + i%26)), Cluster: strings.Repeat("c", i)}
		v, _ := peermeta.EncodeHeader(w)
		s := streamtest.New("h", "/", streamtest.NewHeaders(peermeta.HeaderMetadata, v))
		f.DecodeHeaders(s)
	}
	if n := len(f.cache); n > maxCache {
		t.Errorf("cache holds %d", n)
	}
}

// Each request is labelled with what its own header says, whatever came
// before: the last value's fast path matches the value exactly, a value
// that does not decode leaves the peer unknown (and is not what the next
// request is compared with), and a forged peer is the forged peer, not
// the one before it.
func TestDecodeLast(t *testing.T) {
	f := build(t, inboundConfig(t))
	known := istioHeader(t)
	forged, _ := peermeta.EncodeHeader(peermeta.Workload{Workload: "forged", Namespace: "evil"})
	peerOf := func(v string) *peermeta.Workload {
		s := streamtest.New("h", "/", streamtest.NewHeaders(peermeta.HeaderMetadata, v))
		f.DecodeHeaders(s)
		return PeerOf(s.Metadata(), DownstreamPeer)
	}
	first := peerOf(known)
	if first == nil || first.Workload != "productpage-v1" {
		t.Fatalf("peer %+v", first)
	}
	for i, c := range []struct {
		value, want string
	}{
		{known, "productpage-v1"}, {"garbage!", ""}, {known[:len(known)-4], ""}, {known, "productpage-v1"},
		{forged, "forged"}, {known, "productpage-v1"}, {forged, "forged"}, {"garbage!", ""}, {forged, "forged"},
	} {
		got := peerOf(c.value)
		switch {
		case c.want == "" && got != nil:
			t.Errorf("%d: %.20q decoded as %+v", i, c.value, got)
		case c.want != "" && (got == nil || got.Workload != c.want):
			t.Errorf("%d: %.20q decoded as %+v, want %s", i, c.value, got, c.want)
		}
	}
	if got := peerOf(known); got != first {
		t.Errorf("the known value decoded again (%p, first %p)", got, first)
	}
}

// A peer that sends x-envoy-peer-metadata twice (a real value and a
// forged one) is no peer, on either side and on a header map with or
// without the one-pass FieldTaker: both fields are stripped, neither
// value labels the request, and the exchange is still answered.
func TestMetadataTwice(t *testing.T) {
	real := istioHeader(t)
	forged, err := peermeta.EncodeHeader(peermeta.Workload{Namespace: "default", Workload: "forged"})
	if err != nil {
		t.Fatal(err)
	}
	for _, taker := range []bool{false, true} {
		in := build(t, inboundConfig(t))
		req := streamtest.NewHeaders(peermeta.HeaderMetadata, real, "x-app", "1", peermeta.HeaderMetadata, forged)
		var s httpfilter.Stream = streamtest.New("ratings:9080", "/", req)
		if taker {
			s = takerStream{s.(*streamtest.Stream), takerMap{req}}
		}
		in.DecodeHeaders(s)
		if len(req.Fields) != 1 || PeerOf(s.Metadata(), DownstreamPeer) != nil {
			t.Errorf("taker %v: request to the app %v, peer %+v", taker, req.Fields, PeerOf(s.Metadata(), DownstreamPeer))
		}
		resp := streamtest.NewHeaders()
		in.EncodeHeaders(s, 200, resp)
		if md, _ := resp.Lookup(peermeta.HeaderMetadata); md == "" {
			t.Errorf("taker %v: not answered: %v", taker, resp.Fields)
		}

		out := build(t, outboundConfig(t))
		s = streamtest.New("productpage:9080", "/", streamtest.NewHeaders())
		out.DecodeHeaders(s)
		if id, _ := s.RequestHeaders().Lookup(peermeta.HeaderMetadataID); id != ratingsNode.Id {
			t.Errorf("taker %v: request exchange id %q", taker, id)
		}
		resp = streamtest.NewHeaders(peermeta.HeaderMetadata, forged, "content-length", "0", peermeta.HeaderMetadata, real)
		var rh httpfilter.HeaderMap = resp
		if taker {
			rh = takerMap{resp}
		}
		out.EncodeHeaders(s, 200, rh)
		if len(resp.Fields) != 1 || PeerOf(s.Metadata(), UpstreamPeer) != nil {
			t.Errorf("taker %v: response to the client %v, upstream peer %+v", taker, resp.Fields, PeerOf(s.Metadata(), UpstreamPeer))
		}
	}
}

// takerStream is a stream whose request headers are a takerMap.
type takerStream struct {
	*streamtest.Stream
	h takerMap
}

func (s takerStream) RequestHeaders() httpfilter.HeaderMap { return s.h }

// takerMap is streamtest's header map with TakeFields, as the HTTP/1.1
// codec's has it.
type takerMap struct{ *streamtest.Headers }

func (m takerMap) TakeFields(a, b string) (va string, na int, vb string, nb int) {
	out := m.Fields[:0]
	for _, f := range m.Fields {
		switch {
		case strings.EqualFold(f[0], a):
			if na == 0 {
				va = f[1]
			}
			na++
		case strings.EqualFold(f[0], b):
			if nb == 0 {
				vb = f[1]
			}
			nb++
		default:
			out = append(out, f)
		}
	}
	m.Fields = out
	return va, na, vb, nb
}
