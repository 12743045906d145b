package hcm

import (
	"log/slog"
	"testing"

	udpav1 "github.com/cncf/xds/go/udpa/type/v1"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	statspb "istio.io/api/envoy/extensions/stats"

	"github.com/straitmesh/strait/internal/proxy/filters/http/registry"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/peermeta"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// BenchmarkProxyIstioTelemetry is BenchmarkProxy's plain case with
// Istio's inbound telemetry filters in the chain (istio.metadata_exchange,
// istio.stats as istiod configures them): what telemetry costs a request,
// against BenchmarkProxy/strait in the same run. The requests carry a
// client sidecar's exchange headers, so the peer is read (and cached),
// stripped and answered, as on every mesh request.
func BenchmarkProxyIstioTelemetry(b *testing.B) {
	be := rawBackend(b)
	mxv, _ := structpb.NewStruct(map[string]any{
		"downstream_discovery":   []any{map[string]any{"istio_headers": map[string]any{}}},
		"downstream_propagation": []any{map[string]any{"istio_headers": map[string]any{}}},
	})
	mx, _ := anypb.New(&udpav1.TypedStruct{TypeUrl: "type.googleapis.com/io.istio.http.peer_metadata.Config", Value: mxv})
	st, _ := anypb.New(&statspb.PluginConfig{DisableHostHeaderFallback: true})
	md, _ := structpb.NewStruct(map[string]any{"NAMESPACE": "bench", "WORKLOAD_NAME": "bench"})
	list := []*hcmv3.HttpFilter{
		{Name: "istio.metadata_exchange", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mx}},
		{Name: "istio.stats", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: st}},
		{Name: routerFilter},
	}
	ch, err := buildChain(list, registry.Default(), httpfilter.BuildContext{Stats: stats.New(),
		Node: &corev3.Node{Id: "bench", Metadata: md}, Direction: corev3.TrafficDirection_INBOUND})
	if err != nil {
		b.Fatal(err)
	}
	p := startProxyFilterWith(b, CodecStrait, be, slog.New(slog.DiscardHandler), nil, func(f *Filter) { f.chain = ch })
	// The client's sidecar sends its workload, as every mesh request has it.
	peer, err := peermeta.EncodeHeader(peermeta.Workload{Instance: "client-1", Namespace: "bench", Workload: "client",
		Cluster: "Kubernetes", CanonicalService: "client", CanonicalRevision: "v1", App: "client", Version: "v1"})
	if err != nil {
		b.Fatal(err)
	}
	req := []byte("GET /bench HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\nX-Envoy-Peer-Metadata-Id: sidecar~10.0.0.1~client-1.bench~bench.svc.cluster.local\r\nX-Envoy-Peer-Metadata: " + peer + "\r\n\r\n")
	benchRequests(b, p.addr, req)
}
