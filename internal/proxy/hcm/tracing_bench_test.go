package hcm

import (
	"log/slog"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/straitmesh/strait/internal/proxy/filters/http/registry"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/tracing"
)

// discard is a Reporter that drops spans (the benchmark measures the
// request path, not a collector).
type discard struct{}

func (discard) Report(*tracing.Span) {}

// BenchmarkProxyTracing is BenchmarkProxy's strait case with the HCM's
// tracing on at percent random sampling (Zipkin, B3): the cost of the
// decision, the x-request-id and the injected context on every request,
// and of a span on the sampled ones.
func BenchmarkProxyTracing(b *testing.B) {
	for _, bc := range []struct {
		name    string
		percent uint32 // of 10000
	}{{"1pct", 100}, {"100pct", 10000}} {
		b.Run(bc.name, func(b *testing.B) {
			be := rawBackend(b)
			cfg := &tracing.Config{Sampling: tracing.Sampling{Client: 10000, Random: bc.percent, Overall: 10000}, RequestID: tracing.DefaultRequestID,
				MaxPathTagLength: 256, Provider: tracing.Provider{Kind: tracing.KindZipkin, Cluster: "zipkin", Host: "zipkin", Path: "/api/v2/spans", TraceID128: true}}
			tf, err := tracing.NewFilter(tracing.FilterOptions{Config: cfg, Reporter: discard{}, Node: &corev3.Node{Id: "bench", Cluster: "bench"},
				Direction: corev3.TrafficDirection_OUTBOUND})
			if err != nil {
				b.Fatal(err)
			}
			p := startProxyFilterWith(b, CodecStrait, be, slog.New(slog.DiscardHandler), nil, func(f *Filter) {
				ch, err := buildChainWith([]*hcmv3.HttpFilter{{Name: routerFilter}}, registry.Default(), httpfilter.BuildContext{}, tf)
				if err != nil {
					b.Fatal(err)
				}
				f.chain = ch
			})
			benchRequests(b, p.addr, []byte("GET /bench HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\n\r\n"))
		})
	}
}
