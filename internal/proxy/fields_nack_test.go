package proxy

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/straitmesh/strait/internal/proxy/xdstest"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestFieldAuditNACKs: over ADS, a listener, route configuration or load
// assignment that sets a field strait-proxy does not implement is NACKed
// with a detail naming the field, and the proxy keeps serving the version
// it had.
func TestFieldAuditNACKs(t *testing.T) {
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

	listener := httpListener(t, "http", lnAddr, "80")
	srv.Set(xdsapi.ClusterType, "1", edsCluster("a"))
	srv.Set(xdsapi.ListenerType, "1", listener)
	srv.Set(xdsapi.EndpointType, "1", cla("a", a.Listener.Addr().String()))
	srv.Set(xdsapi.RouteType, "1", weightedRoute("80", 1, 0))
	for _, typ := range []string{xdsapi.ClusterType, xdsapi.ListenerType, xdsapi.EndpointType, xdsapi.RouteType} {
		acked(t, srv, typ, "1")
	}
	client := &http.Client{Timeout: 5 * time.Second}
	serves := func(t *testing.T) {
		t.Helper()
		if code, body, err := get(client, "http://"+lnAddr+"/"); err != nil || code != 200 || body != "a" {
			t.Fatalf("GET / = %d %q %v; want a's answer from the version before", code, body, err)
		}
	}
	serves(t)

	// The HCM of listener "http" with tracing set (istiod sets it when
	// tracing is enabled).
	traced := proto.Clone(listener).(*listenerv3.Listener)
	var h hcmv3.HttpConnectionManager
	if err := traced.GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&h); err != nil {
		t.Fatal(err)
	}
	h.Tracing = &hcmv3.HttpConnectionManager_Tracing{}
	traced.GetFilterChains()[0].GetFilters()[0].ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: toAny(t, &h)}

	mirrored := weightedRoute("80", 1, 0)
	mirrored.VirtualHosts[0].Routes[0].GetRoute().RequestMirrorPolicies = []*routev3.RouteAction_RequestMirrorPolicy{{Cluster: "a", ClusterHeader: "x-mirror"}}

	named := cla("a", a.Listener.Addr().String())
	named.Endpoints[0].LbEndpoints[0].GetEndpoint().Address.GetSocketAddress().ResolverName = "custom"

	for i, tc := range []struct {
		typ, want string
		res       proto.Message
	}{
		{xdsapi.ListenerType, "tracing", traced},
		{xdsapi.RouteType, "request_mirror_policies[0].cluster_header", mirrored},
		{xdsapi.EndpointType, "socket_address.resolver_name", named},
		{xdsapi.EndpointType, "endpoint.health_check_config.hostname", func() *endpointv3.ClusterLoadAssignment {
			c := cla("a", a.Listener.Addr().String())
			c.Endpoints[0].LbEndpoints[0].GetEndpoint().HealthCheckConfig = &endpointv3.Endpoint_HealthCheckConfig{Hostname: "h"}
			return c
		}()},
	} {
		t.Run(tc.want, func(t *testing.T) {
			srv.Set(tc.typ, strconv.Itoa(i+2), tc.res)
			nack := srv.WaitRequest(t, 10*time.Second, func(r *discoveryv3.DiscoveryRequest) bool {
				return r.GetTypeUrl() == tc.typ && r.GetErrorDetail() != nil && strings.Contains(r.GetErrorDetail().GetMessage(), tc.want)
			})
			if nack.GetVersionInfo() != "1" || !strings.Contains(nack.GetErrorDetail().GetMessage(), tc.want) {
				t.Errorf("NACK = version %q detail %q; want version 1 and a detail naming %s", nack.GetVersionInfo(), nack.GetErrorDetail().GetMessage(), tc.want)
			}
			serves(t)
		})
	}
}
