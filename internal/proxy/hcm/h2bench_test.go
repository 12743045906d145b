package hcm

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/straitmesh/strait/internal/proxy/grpctest"
)

// BenchmarkProxyGRPCUnary is one unary gRPC call (grpctest's Echo, a
// 100-byte message, one header and one trailer metadata entry) from a
// grpc-go client through the HCM to a grpc-go server over an HTTP/2
// upstream, the shape of bench/http/grpc.sh's hops. allocs/op counts the
// client's and the server's too: read it against itself, or run with
// -memprofile and look at the proxy's packages.
func BenchmarkProxyGRPCUnary(b *testing.B) {
	_, gaddr := grpctest.Serve(b)
	addr := startH2Proxy(b, CodecStrait, []*routev3.Route{prefixRoute("/", "grpc")}, nil, h2Cluster(b, "grpc", gaddr))
	c := grpctest.Dial(b, addr)
	ctx := context.Background()
	msg := strings.Repeat("x", 100)
	b.ReportAllocs()
	for b.Loop() {
		got, err := c.Echo(ctx, msg, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		if got != msg {
			b.Fatalf("echo returned %d bytes, want %d", len(got), len(msg))
		}
	}
}

// BenchmarkProxyH2Upstream is one h2c GET through the HCM to an h2c
// upstream (the strait-h2up chain of bench/http/h2.sh).
func BenchmarkProxyH2Upstream(b *testing.B) {
	be := protoBackend(b, true)
	addr := startH2Proxy(b, CodecStrait, []*routev3.Route{prefixRoute("/", "h2")}, nil, h2Cluster(b, "h2", be.Listener.Addr().String()))
	c := h2cClient()
	url := "http://" + addr + "/bench"
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}
