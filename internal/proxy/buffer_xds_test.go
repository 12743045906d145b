package proxy

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	bufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/buffer/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/xdstest"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// bufferedListener is httpListener with envoy.filters.http.buffer
// (max_request_bytes max) before the router, as an EnvoyFilter adds it;
// extra is appended to the Buffer's encoding (a field of a newer API).
func bufferedListener(t *testing.T, name, addr, rds string, max uint32, extra []byte) *listenerv3.Listener {
	t.Helper()
	l := httpListener(t, name, addr, rds)
	var h hcmv3.HttpConnectionManager
	if err := l.GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&h); err != nil {
		t.Fatal(err)
	}
	b := toAny(t, &bufferv3.Buffer{MaxRequestBytes: wrapperspb.UInt32(max)})
	b.Value = append(b.Value, extra...)
	h.HttpFilters = append([]*hcmv3.HttpFilter{{Name: "envoy.filters.http.buffer",
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: b}}}, h.HttpFilters...)
	l.GetFilterChains()[0].GetFilters()[0].ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: toAny(t, &h)}
	return l
}

// TestBufferFilterOverADS: a listener whose HCM lists the buffer filter is
// ACKed and serves (a body within max_request_bytes goes upstream, a
// larger one is answered 413); one whose Buffer has a field strait-proxy
// does not know is NACKed with a detail naming the filter, and the
// version before keeps serving.
func TestBufferFilterOverADS(t *testing.T) {
	srv := xdstest.Start(t)
	a := backend(t, "a")
	lnAddr := freeAddr(t)
	p, err := New(Options{Bootstrap: adsBootstrap(srv.Addr), Logger: testLogger(t), AdminAddress: "127.0.0.1:0",
		Concurrency: 2, XDSBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })

	srv.Set(xdsapi.ClusterType, "1", edsCluster("a"))
	srv.Set(xdsapi.ListenerType, "1", bufferedListener(t, "http", lnAddr, "80", 10, nil))
	srv.Set(xdsapi.EndpointType, "1", cla("a", a.Listener.Addr().String()))
	srv.Set(xdsapi.RouteType, "1", weightedRoute("80", 1, 0))
	for _, typ := range []string{xdsapi.ClusterType, xdsapi.ListenerType, xdsapi.EndpointType, xdsapi.RouteType} {
		acked(t, srv, typ, "1")
	}
	client := &http.Client{Timeout: 5 * time.Second}
	post := func(n int) (int, string) {
		t.Helper()
		resp, err := client.Post("http://"+lnAddr+"/", "text/plain", strings.NewReader(strings.Repeat("x", n)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	serves := func(t *testing.T) {
		t.Helper()
		if code, body := post(10); code != 200 || body != "a" {
			t.Fatalf("POST 10 bytes = %d %q; want a's answer", code, body)
		}
		if code, body := post(11); code != 413 || body != "Payload Too Large" {
			t.Fatalf("POST 11 bytes = %d %q; want 413 Payload Too Large", code, body)
		}
	}
	serves(t)

	bad := bufferedListener(t, "http", lnAddr, "80", 10, []byte{0xf8, 0x01, 0x01}) // field 31: not in this API
	srv.Set(xdsapi.ListenerType, "2", proto.Message(bad))
	nack := srv.WaitRequest(t, 10*time.Second, func(r *discoveryv3.DiscoveryRequest) bool {
		return r.GetTypeUrl() == xdsapi.ListenerType && r.GetErrorDetail() != nil
	})
	if msg := nack.GetErrorDetail().GetMessage(); nack.GetVersionInfo() != "1" || !strings.Contains(msg, "envoy.filters.http.buffer") || !strings.Contains(msg, "does not know") {
		t.Errorf("NACK = version %q detail %q; want version 1 and a detail naming the buffer filter's unknown field", nack.GetVersionInfo(), msg)
	}
	serves(t)
}
