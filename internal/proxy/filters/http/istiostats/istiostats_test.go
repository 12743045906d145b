package istiostats

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	statspb "istio.io/api/envoy/extensions/stats"

	udpav1 "github.com/cncf/xds/go/udpa/type/v1"

	"github.com/straitmesh/strait/internal/proxy/filters/http/metadataexchange"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/httpfilter/streamtest"
	"github.com/straitmesh/strait/internal/proxy/istiometrics"
	"github.com/straitmesh/strait/internal/proxy/peermeta"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

func node(id string, md map[string]any) *corev3.Node {
	s, err := structpb.NewStruct(md)
	if err != nil {
		panic(err)
	}
	return &corev3.Node{Id: id, Metadata: s}
}

var (
	ratings = node("sidecar~10.0.0.2~ratings-v1-1.default~default.svc.cluster.local", map[string]any{
		"NAMESPACE": "default", "WORKLOAD_NAME": "ratings-v1", "CLUSTER_ID": "server-cluster",
		"LABELS": map[string]any{"app": "ratings", "version": "v1", "service.istio.io/canonical-name": "ratings", "service.istio.io/canonical-revision": "version-1"}})
	productpage = node("sidecar~10.0.0.1~productpage-v1-1.default~default.svc.cluster.local", map[string]any{
		"NAMESPACE": "default", "WORKLOAD_NAME": "productpage-v1", "CLUSTER_ID": "client-cluster",
		"LABELS": map[string]any{"app": "productpage", "version": "v1", "service.istio.io/canonical-name": "productpage-v1", "service.istio.io/canonical-revision": "version-1"}})
)

// Istio's configs: generateStatsConfig gives inbound
// disable_host_header_fallback, outbound nothing.
func statsConfig(t *testing.T, inbound bool) *anypb.Any {
	a, err := anypb.New(&statspb.PluginConfig{DisableHostHeaderFallback: inbound})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mxConfig(t *testing.T, inbound bool) *anypb.Any {
	side := "upstream"
	if inbound {
		side = "downstream"
	}
	v, _ := structpb.NewStruct(map[string]any{
		side + "_discovery":   []any{map[string]any{"istio_headers": map[string]any{}}, map[string]any{"workload_discovery": map[string]any{}}},
		side + "_propagation": []any{map[string]any{"istio_headers": map[string]any{}}},
	})
	a, _ := anypb.New(&udpav1.TypedStruct{TypeUrl: metadataexchange.TypeURL, Value: v})
	return a
}

type chain struct {
	mx    httpfilter.Filter
	stats httpfilter.Filter
	store *stats.Store
}

func newChain(t *testing.T, n *corev3.Node, dir corev3.TrafficDirection, store *stats.Store) chain {
	t.Helper()
	inbound := dir == corev3.TrafficDirection_INBOUND
	ctx := httpfilter.BuildContext{Stats: store, Node: n, Direction: dir}
	mx, err := metadataexchange.Factory{}.Build(mxConfig(t, inbound), ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := Factory{}.Build(statsConfig(t, inbound), ctx)
	if err != nil {
		t.Fatal(err)
	}
	return chain{mx, st, store}
}

// run passes a request through the two filters and an upstream that
// answers with respHeaders, then completes it.
func (c chain) run(s *streamtest.Stream, status int, respHeaders *streamtest.Headers, info httpfilter.StreamInfo) {
	c.mx.DecodeHeaders(s)
	c.stats.DecodeHeaders(s)
	c.mx.(httpfilter.ResponseEncoder).EncodeHeaders(s, status, respHeaders)
	info.Status = status
	c.stats.(httpfilter.Completer).Complete(s, &info)
}

func prom(t *testing.T, s *stats.Store) string {
	var b strings.Builder
	if err := s.WritePrometheus(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A client sidecar (productpage, outbound) calls a server sidecar
// (ratings, inbound): the client's request headers carry the exchange to
// the server, the server's response carries it back, and each reports
// the request with the other's labels, as Istio's stats tests expect.
func TestBothReporters(t *testing.T) {
	client := newChain(t, productpage, corev3.TrafficDirection_OUTBOUND, stats.New())
	server := newChain(t, ratings, corev3.TrafficDirection_INBOUND, stats.New())

	out := streamtest.New("ratings:9080", "/ratings/0", streamtest.NewHeaders("user-agent", "curl"))
	client.mx.DecodeHeaders(out) // our headers onto the request
	// The server's sidecar gets the request as the client's sent it.
	in := streamtest.New("ratings:9080", "/ratings/0", &streamtest.Headers{Fields: append([][2]string(nil), out.Request.Fields...)})
	resp := streamtest.NewHeaders("content-type", "application/json")
	// The inbound cluster's name has no host; its istio.services metadata
	// (cluster.Cluster.IstioService) names the service.
	svc := istiometrics.Service{Host: "ratings.default.svc.cluster.local", Name: "ratings", Namespace: "default"}
	server.run(in, 200, resp, httpfilter.StreamInfo{GRPCStatus: -1, Duration: 7 * time.Millisecond, BytesOut: 100, Cluster: "inbound|9080||", Service: &svc})
	if _, ok := in.Request.Lookup(peermeta.HeaderMetadata); ok {
		t.Error("exchange header reached the app")
	}
	client.stats.DecodeHeaders(out)
	client.mx.(httpfilter.ResponseEncoder).EncodeHeaders(out, 200, resp)
	if _, ok := resp.Lookup(peermeta.HeaderMetadata); ok {
		t.Error("exchange header reached the client app")
	}
	client.stats.(httpfilter.Completer).Complete(out, &httpfilter.StreamInfo{Status: 200, GRPCStatus: -1, Duration: 9 * time.Millisecond,
		BytesOut: 100, Cluster: "outbound|9080||ratings.default.svc.cluster.local"})

	serverWant := `istio_requests_total{reporter="destination",source_workload="productpage-v1",source_canonical_service="productpage-v1",source_canonical_revision="version-1",source_workload_namespace="default",source_principal="unknown",source_app="productpage",source_version="v1",source_cluster="client-cluster",destination_workload="ratings-v1",destination_workload_namespace="default",destination_principal="unknown",destination_app="ratings",destination_version="v1",destination_service="ratings.default.svc.cluster.local",destination_canonical_service="ratings",destination_canonical_revision="version-1",destination_service_name="ratings",destination_service_namespace="default",destination_cluster="server-cluster",request_protocol="http",response_code="200",grpc_response_status="",response_flags="-",connection_security_policy="none"} 1`
	clientWant := `istio_requests_total{reporter="source",source_workload="productpage-v1",source_canonical_service="productpage-v1",source_canonical_revision="version-1",source_workload_namespace="default",source_principal="unknown",source_app="productpage",source_version="v1",source_cluster="client-cluster",destination_workload="ratings-v1",destination_workload_namespace="default",destination_principal="unknown",destination_app="ratings",destination_version="v1",destination_service="ratings.default.svc.cluster.local",destination_canonical_service="ratings",destination_canonical_revision="version-1",destination_service_name="ratings",destination_service_namespace="default",destination_cluster="server-cluster",request_protocol="http",response_code="200",grpc_response_status="",response_flags="-",connection_security_policy="unknown"} 1`
	if p := prom(t, server.store); !strings.Contains(p, serverWant+"\n") {
		t.Errorf("server:\n%s", p)
	}
	if p := prom(t, client.store); !strings.Contains(p, clientWant+"\n") {
		t.Errorf("client:\n%s", p)
	}
	p := prom(t, server.store)
	for _, want := range []string{
		"# TYPE istio_request_duration_milliseconds histogram\n",
		`,le="5"} 0` + "\n", `,le="10"} 1` + "\n",
		"# TYPE istio_request_bytes histogram\n", "# TYPE istio_response_bytes histogram\n",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("server output lacks %q", want)
		}
	}
}

// Neither paths nor (inbound) Host headers become labels: 10,000
// distinct ones add no series.
func TestCardinality(t *testing.T) {
	store := stats.New()
	server := newChain(t, ratings, corev3.TrafficDirection_INBOUND, store)
	v, _ := peermeta.EncodeHeader(peermeta.FromStruct(productpage.Metadata))
	for i := range 10_000 {
		s := streamtest.New(fmt.Sprintf("h%d.default.svc.cluster.local", i), fmt.Sprintf("/item/%d?q=%d", i, i),
			streamtest.NewHeaders(peermeta.HeaderMetadataID, "c", peermeta.HeaderMetadata, v))
		server.run(s, 200, streamtest.NewHeaders(), httpfilter.StreamInfo{GRPCStatus: -1})
	}
	if n := store.SeriesCount(); n != 4 {
		t.Errorf("%d series after 10,000 paths and hosts, want 4 (one per family)", n)
	}
}

// Values a client chooses that do reach labels are bounded by the
// store's series cap (stats.DefaultMaxSeries across all families), not
// by what the client sends: 10,000 distinct Host headers through a
// client sidecar's catch-all (PassthroughCluster: no service, so the
// source reporter's destination_service is the Host, as Istio's), and
// 10,000 distinct forged x-envoy-peer-metadata workloads into a server
// sidecar (source_workload, _namespace, _app, …). Past the cap every new
// set of values is dropped and counted in stats.series_overflow, the
// series made before keep counting, and the filters' own caches stay
// within their bounds.
func TestHostileCardinality(t *testing.T) {
	const n = 10_000
	check := func(t *testing.T, store *stats.Store, f *Filter) {
		t.Helper()
		if got := store.SeriesCount(); got != stats.DefaultMaxSeries {
			t.Errorf("%d series after %d distinct values, want the cap, %d", got, n, stats.DefaultMaxSeries)
		}
		// Each request has 4 series (one per family); those past the cap are dropped.
		if got, want := store.Counter("stats.series_overflow").Load(), uint64(4*n-stats.DefaultMaxSeries); got != want {
			t.Errorf("series_overflow %d, want %d", got, want)
		}
		f.mu.RLock()
		cached := len(f.cache)
		f.mu.RUnlock()
		if cached > maxCachedSeries {
			t.Errorf("%d series sets cached, over %d", cached, maxCachedSeries)
		}
	}

	t.Run("hosts through a catch-all", func(t *testing.T) {
		store := stats.New()
		client := newChain(t, productpage, corev3.TrafficDirection_OUTBOUND, store)
		first := fmt.Sprintf("h%d.example.com", 0)
		for i := range n {
			client.run(streamtest.New(fmt.Sprintf("h%d.example.com", i), "/", nil), 200, streamtest.NewHeaders(),
				httpfilter.StreamInfo{GRPCStatus: -1, Cluster: "PassthroughCluster"})
		}
		check(t, store, client.stats.(*Filter))
		// The first host's series was made before the cap: it still counts.
		client.run(streamtest.New(first, "/", nil), 200, streamtest.NewHeaders(), httpfilter.StreamInfo{GRPCStatus: -1, Cluster: "PassthroughCluster"})
		if p := prom(t, store); !strings.Contains(p, `destination_service="`+first+`",`) || !strings.Contains(p, `response_flags="-",connection_security_policy="unknown"} 2`) {
			t.Errorf("the first host's series did not count its second request")
		}
	})

	t.Run("forged peer metadata", func(t *testing.T) {
		store := stats.New()
		server := newChain(t, ratings, corev3.TrafficDirection_INBOUND, store)
		for i := range n {
			v, err := peermeta.EncodeHeader(peermeta.Workload{Workload: fmt.Sprintf("forged-%d", i), Namespace: "evil", App: fmt.Sprintf("a%d", i)})
			if err != nil {
				t.Fatal(err)
			}
			server.run(streamtest.New("ratings:9080", "/", streamtest.NewHeaders(peermeta.HeaderMetadataID, "x", peermeta.HeaderMetadata, v)),
				200, streamtest.NewHeaders(), httpfilter.StreamInfo{GRPCStatus: -1})
		}
		check(t, store, server.stats.(*Filter))
		if p := prom(t, store); !strings.Contains(p, `source_workload="forged-0",`) || strings.Contains(p, fmt.Sprintf(`source_workload="forged-%d",`, n-1)) {
			t.Errorf("want the first forged workload's series and not the last one's")
		}
	})
}

// gRPC requests are labeled grpc with their status; a local reply's
// flags show.
func TestGRPCAndFlags(t *testing.T) {
	store := stats.New()
	server := newChain(t, ratings, corev3.TrafficDirection_INBOUND, store)
	s := streamtest.New("ratings:9080", "/pkg.Svc/M", streamtest.NewHeaders("content-type", "application/grpc"))
	server.run(s, 200, streamtest.NewHeaders(), httpfilter.StreamInfo{GRPCStatus: 14, Flags: "UF"})
	// A request that is not gRPC has no gRPC status, even when the
	// response carries one (grpc-go answers a request without
	// application/grpc 415 with a grpc-status), as Istio's filter reads
	// it only for gRPC requests.
	server.run(streamtest.New("ratings:9080", "/pkg.Svc/M", streamtest.NewHeaders("content-type", "text/plain")), 415,
		streamtest.NewHeaders(), httpfilter.StreamInfo{GRPCStatus: 3})
	p := prom(t, store)
	if !strings.Contains(p, `request_protocol="grpc",response_code="200",grpc_response_status="14",response_flags="UF"`) {
		t.Errorf("output:\n%s", p)
	}
	if !strings.Contains(p, `request_protocol="http",response_code="415",grpc_response_status="",response_flags="-"`) {
		t.Errorf("no 415 without a gRPC status in:\n%s", p)
	}
}

// Built without a store (the HCM's first, validating build), the filter
// works and records nowhere visible.
func TestBuildWithoutStore(t *testing.T) {
	f, err := Factory{}.Build(statsConfig(t, true), httpfilter.BuildContext{Node: ratings, Direction: corev3.TrafficDirection_INBOUND})
	if err != nil {
		t.Fatal(err)
	}
	f.(httpfilter.Completer).Complete(streamtest.New("h", "/", nil), &httpfilter.StreamInfo{Status: 200, GRPCStatus: -1})
}

// A metric the Telemetry API disabled (drop) is neither created nor
// recorded; the others are.
func TestDroppedMetric(t *testing.T) {
	a, _ := anypb.New(&statspb.PluginConfig{Metrics: []*statspb.MetricConfig{{Name: "requests_total", Drop: true}, {Name: "request_bytes"}}})
	st := stats.New()
	f, err := Factory{}.Build(a, httpfilter.BuildContext{Node: ratings, Direction: corev3.TrafficDirection_INBOUND, Stats: st})
	if err != nil {
		t.Fatal(err)
	}
	f.(httpfilter.Completer).Complete(streamtest.New("h", "/", nil), &httpfilter.StreamInfo{Status: 200, GRPCStatus: -1})
	var b strings.Builder
	if err := st.WritePrometheus(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "istio_requests_total") {
		t.Errorf("dropped istio_requests_total exported:\n%s", out)
	}
	for _, want := range []string{"istio_request_duration_milliseconds_count{", "istio_request_bytes_count{"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in:\n%s", want, out)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for name, c := range map[string]*statspb.PluginConfig{
		"metrics dimensions":  {Metrics: []*statspb.MetricConfig{{Name: "requests_total", Dimensions: map[string]string{"a": "b"}}}},
		"metrics tag removal": {Metrics: []*statspb.MetricConfig{{Name: "requests_total", TagsToRemove: []string{"request_protocol"}}}},
		"custom metric":       {Metrics: []*statspb.MetricConfig{{Name: "my_metric", Drop: true}}},
		"definitions":         {Definitions: []*statspb.MetricDefinition{{Name: "x", Value: "1"}}},
		"waypoint":            {Reporter: statspb.Reporter_SERVER_GATEWAY},
		"rotation":            {RotationInterval: durationpb.New(time.Minute)},
		"prefix":              {StatPrefix: "custom_"},
	} {
		a, _ := anypb.New(c)
		if _, err := Parse(a); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	a, _ := anypb.New(&statspb.PluginConfig{DisableHostHeaderFallback: true, TcpReportingDuration: durationpb.New(5 * time.Second)})
	if _, err := Parse(a); err != nil {
		t.Errorf("Istio's config refused: %v", err)
	}
}

// BenchmarkInboundRequest is what the two filters cost a request on an
// inbound sidecar: the exchange headers read (decoded once, then from
// the cache) and stripped, ours added to the response, and the four
// metrics recorded.
func BenchmarkInboundRequest(b *testing.B) {
	t := &testing.T{}
	server := newChain(t, ratings, corev3.TrafficDirection_INBOUND, stats.New())
	v, _ := peermeta.EncodeHeader(peermeta.FromStruct(productpage.Metadata))
	req := streamtest.NewHeaders(peermeta.HeaderMetadataID, "c", peermeta.HeaderMetadata, v, "user-agent", "bench")
	fields := append([][2]string(nil), req.Fields...)
	s := streamtest.New("ratings:9080", "/ratings/0", req)
	resp := streamtest.NewHeaders("content-type", "application/json")
	respFields := append([][2]string(nil), resp.Fields...)
	info := httpfilter.StreamInfo{GRPCStatus: -1, Duration: 3 * time.Millisecond, BytesOut: 100}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		req.Fields = append(req.Fields[:0], fields...)
		resp.Fields = append(resp.Fields[:0], respFields...)
		s.MD.Reset()
		server.run(s, 200, resp, info)
	}
}

// A source reporter (the client's sidecar, a gateway) labels its request
// with the identities of the upstream mTLS connection: the server's
// certificate is the destination_principal, ours the source_principal,
// as Istio's outbound stats read them. Without mTLS both are unknown.
func TestSourcePrincipals(t *testing.T) {
	store := stats.New()
	client := newChain(t, productpage, corev3.TrafficDirection_OUTBOUND, store)
	const server, us = "spiffe://cluster.local/ns/default/sa/ratings", "spiffe://cluster.local/ns/default/sa/productpage"
	for _, info := range []httpfilter.StreamInfo{
		{GRPCStatus: -1, Cluster: "outbound|9080||ratings.default.svc.cluster.local", UpstreamPeerPrincipal: server, UpstreamLocalPrincipal: us},
		{GRPCStatus: -1, Cluster: "outbound|9080||ratings.default.svc.cluster.local"},
	} {
		client.run(streamtest.New("ratings:9080", "/", nil), 200, streamtest.NewHeaders(), info)
	}
	p := prom(t, store)
	for _, want := range []string{
		`istio_requests_total{reporter="source",source_workload="productpage-v1",source_canonical_service="productpage-v1",source_canonical_revision="version-1",source_workload_namespace="default",source_principal="` + us + `",`,
		`destination_workload_namespace="unknown",destination_principal="` + server + `",`,
		`source_principal="unknown",`, `destination_principal="unknown",`,
	} {
		if !strings.Contains(p, want) {
			t.Errorf("no %s in:\n%s", want, p)
		}
	}
}

// The filter's cache of series sets leaves the store's cap as it was:
// at the cap, every request's drop is counted (none is remembered as
// recorded), and a full cache is emptied rather than grown.
func TestSeriesCacheBounds(t *testing.T) {
	store := stats.New()
	store.SetMaxSeries(2) // istio_requests_total and one histogram: the other two drop
	server := newChain(t, ratings, corev3.TrafficDirection_INBOUND, store)
	v, _ := peermeta.EncodeHeader(peermeta.FromStruct(productpage.Metadata))
	for range 5 {
		server.run(streamtest.New("h", "/", streamtest.NewHeaders(peermeta.HeaderMetadata, v)), 200, streamtest.NewHeaders(), httpfilter.StreamInfo{GRPCStatus: -1})
	}
	if n := store.Counter("stats.series_overflow").Load(); n != 10 {
		t.Errorf("series_overflow %d after 5 requests missing 2 series each, want 10", n)
	}
	if !strings.Contains(prom(t, store), `response_code="200",grpc_response_status="",response_flags="-",connection_security_policy="none"} 5`) {
		t.Errorf("the kept series did not count 5:\n%s", prom(t, store))
	}

	store = stats.New()
	server = newChain(t, ratings, corev3.TrafficDirection_INBOUND, store)
	f := server.stats.(*Filter)
	for code := range maxCachedSeries + 10 {
		server.run(streamtest.New("h", "/", streamtest.NewHeaders("content-type", "application/grpc")), 100+code%500, streamtest.NewHeaders(), httpfilter.StreamInfo{GRPCStatus: code})
	}
	f.mu.RLock()
	n := len(f.cache)
	f.mu.RUnlock()
	if n > maxCachedSeries {
		t.Errorf("%d series sets cached, over %d", n, maxCachedSeries)
	}
	if got := store.SeriesCount(); got != 4*(maxCachedSeries+10) {
		t.Errorf("%d series, want %d", got, 4*(maxCachedSeries+10))
	}
}

// Once a request's series exist, recording the next one like it does
// not allocate.
func TestCompleteNoAlloc(t *testing.T) {
	server := newChain(t, ratings, corev3.TrafficDirection_INBOUND, stats.New())
	f := server.stats.(*Filter)
	s := streamtest.New("ratings:9080", "/ratings/0", streamtest.NewHeaders("user-agent", "bench"))
	svc := istiometrics.Service{Host: "ratings.default.svc.cluster.local", Name: "ratings", Namespace: "default"}
	info := &httpfilter.StreamInfo{Status: 200, GRPCStatus: -1, Duration: 3 * time.Millisecond, Service: &svc}
	f.Complete(s, info)
	if n := testing.AllocsPerRun(100, func() { f.Complete(s, info) }); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
}

// BenchmarkOutboundRequest is what the two filters cost a request on a
// client's sidecar: our exchange headers set on the request, the
// server's read (from the cache) and stripped from the response, and
// the four metrics recorded with the upstream's principals.
func BenchmarkOutboundRequest(b *testing.B) {
	t := &testing.T{}
	client := newChain(t, productpage, corev3.TrafficDirection_OUTBOUND, stats.New())
	v, _ := peermeta.EncodeHeader(peermeta.FromStruct(ratings.Metadata))
	req := streamtest.NewHeaders("user-agent", "bench")
	fields := append([][2]string(nil), req.Fields...)
	s := streamtest.New("ratings:9080", "/ratings/0", req)
	resp := streamtest.NewHeaders(peermeta.HeaderMetadataID, "s", peermeta.HeaderMetadata, v, "content-type", "application/json")
	respFields := append([][2]string(nil), resp.Fields...)
	info := httpfilter.StreamInfo{GRPCStatus: -1, Duration: 3 * time.Millisecond, BytesOut: 100, Cluster: "outbound|9080||ratings.default.svc.cluster.local",
		UpstreamPeerPrincipal: "spiffe://cluster.local/ns/default/sa/ratings", UpstreamLocalPrincipal: "spiffe://cluster.local/ns/default/sa/productpage"}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		req.Fields = append(req.Fields[:0], fields...)
		resp.Fields = append(resp.Fields[:0], respFields...)
		s.MD.Reset()
		client.run(s, 200, resp, info)
	}
}

// BenchmarkComplete is istio.stats alone on a request whose series
// exist (the inbound side, mTLS).
func BenchmarkComplete(b *testing.B) {
	t := &testing.T{}
	server := newChain(t, ratings, corev3.TrafficDirection_INBOUND, stats.New())
	f := server.stats.(*Filter)
	s := streamtest.New("ratings:9080", "/ratings/0", streamtest.NewHeaders("user-agent", "bench"))
	svc := istiometrics.Service{Host: "ratings.default.svc.cluster.local", Name: "ratings", Namespace: "default"}
	info := &httpfilter.StreamInfo{Status: 200, GRPCStatus: -1, Duration: 3 * time.Millisecond, Service: &svc}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		f.Complete(s, info)
	}
}

// The filter is shared by a listener's connections: requests complete
// concurrently, finding and filling its cache (run with -race).
func TestConcurrentComplete(t *testing.T) {
	store := stats.New()
	server := newChain(t, ratings, corev3.TrafficDirection_INBOUND, store)
	f := server.stats.(*Filter)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				f.Complete(streamtest.New("h", "/", streamtest.NewHeaders("content-type", "application/grpc")), &httpfilter.StreamInfo{Status: 200, GRPCStatus: (g*2000 + i) % (maxCachedSeries + 50)})
			}
		}()
	}
	wg.Wait()
	var total uint64
	for status := range maxCachedSeries + 50 {
		e := f.exchange(&seriesKey{code: 200, grpcStatus: status, grpc: true})
		total += f.Series(istiometrics.AppendHTTP(nil, &e)).Value()
	}
	if total != 8000 {
		t.Errorf("%d requests counted, want 8000", total)
	}
}

// BenchmarkCompleteRoutes is istio.stats on a gateway whose requests
// cycle through 100 routes, each to its own service (the series of each
// exist): what bench/http/gateway.sh's TELEMETRY=1 gateway records.
func BenchmarkCompleteRoutes(b *testing.B) {
	t := &testing.T{}
	gw := newChain(t, productpage, corev3.TrafficDirection_OUTBOUND, stats.New())
	f := gw.stats.(*Filter)
	s := streamtest.New("gateway.bench", "/r/", streamtest.NewHeaders("user-agent", "bench"))
	infos := make([]httpfilter.StreamInfo, 100)
	for i := range infos {
		infos[i] = httpfilter.StreamInfo{Status: 200, GRPCStatus: -1, Duration: time.Millisecond,
			Cluster: fmt.Sprintf("outbound|80||svc%d.bench.svc.cluster.local", i)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		f.Complete(s, &infos[i%len(infos)])
	}
}

// BenchmarkMeshRequest is the telemetry filters' per-request work on
// both sidecars of one mesh request, as bench/http/run.sh's
// strait-telemetry chain does it: the client's outbound side sets our
// exchange headers on the request; the server's inbound side takes the
// client's (decoded once, then found again), answers with its own, and
// records the four metrics; the client's side takes the server's from
// the response and records its four. Header maps are streamtest's, so
// ns/op includes their cost; allocs/op is the filters' own (the
// StreamInfos are the benchmark's, made once).
func BenchmarkMeshRequest(b *testing.B) {
	t := &testing.T{}
	client := newChain(t, productpage, corev3.TrafficDirection_OUTBOUND, stats.New())
	server := newChain(t, ratings, corev3.TrafficDirection_INBOUND, stats.New())
	out := streamtest.New("ratings:9080", "/ratings/0", streamtest.NewHeaders("user-agent", "bench"))
	outFields := append([][2]string(nil), out.Request.Fields...)
	in := streamtest.New("ratings:9080", "/ratings/0", &streamtest.Headers{})
	resp := streamtest.NewHeaders("content-type", "application/json")
	respFields := append([][2]string(nil), resp.Fields...)
	svc := istiometrics.Service{Host: "ratings.default.svc.cluster.local", Name: "ratings", Namespace: "default"}
	serverInfo := &httpfilter.StreamInfo{}
	clientInfo := &httpfilter.StreamInfo{}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		out.Request.Fields = append(out.Request.Fields[:0], outFields...)
		out.MD.Reset()
		in.MD.Reset()
		resp.Fields = append(resp.Fields[:0], respFields...)
		client.mx.DecodeHeaders(out)
		client.stats.DecodeHeaders(out)
		in.Request.Fields = append(in.Request.Fields[:0], out.Request.Fields...)
		server.mx.DecodeHeaders(in)
		server.stats.DecodeHeaders(in)
		server.mx.(httpfilter.ResponseEncoder).EncodeHeaders(in, 200, resp)
		*serverInfo = httpfilter.StreamInfo{Status: 200, GRPCStatus: -1, Duration: 3 * time.Millisecond, BytesOut: 1024, Cluster: "inbound|9080||", Service: &svc}
		server.stats.(httpfilter.Completer).Complete(in, serverInfo)
		client.mx.(httpfilter.ResponseEncoder).EncodeHeaders(out, 200, resp)
		*clientInfo = httpfilter.StreamInfo{Status: 200, GRPCStatus: -1, Duration: 4 * time.Millisecond, BytesOut: 1024,
			Cluster: "outbound|9080||ratings.default.svc.cluster.local", UpstreamHeaders: resp}
		client.stats.(httpfilter.Completer).Complete(out, clientInfo)
	}
}
