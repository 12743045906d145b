package registry

import (
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/proxy/filters/http/buffer"
	"github.com/straitmesh/strait/internal/proxy/filters/http/cors"
	"github.com/straitmesh/strait/internal/proxy/filters/http/fault"
)

// TestDefault: the filters strait-proxy runs are found by the names and
// type URLs istiod emits (its HttpFilter names and typed_config types);
// per-route parsers exist for the filters that take per-route config
// here (fault, cors, buffer), under their names only.
func TestDefault(t *testing.T) {
	r := Default()
	for _, tc := range []struct{ name, typeURL string }{
		{"envoy.filters.http.jwt_authn", "type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication"},
		{"envoy.filters.http.rbac", "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC"},
		{"envoy.filters.http.fault", "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"},
		{"envoy.filters.http.cors", "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"},
		{"envoy.filters.http.buffer", "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer"},
	} {
		byName, ok := r.Factory(tc.name, "")
		if !ok {
			t.Errorf("%s: not registered by name", tc.name)
			continue
		}
		byType, ok := r.Factory("my-"+tc.name, tc.typeURL)
		if !ok || byType.Names()[0] != byName.Names()[0] {
			t.Errorf("%s: not found by its type URL %s under another name", tc.name, tc.typeURL)
		}
	}
	// Istio's telemetry filters by their names (istio.metadata_exchange's
	// config is a TypedStruct, so its name finds it).
	for _, name := range []string{"istio.stats", "istio.metadata_exchange"} {
		if _, ok := r.Factory(name, ""); !ok {
			t.Errorf("%s is not registered", name)
		}
	}
	if _, ok := r.Factory("my-stats", "type.googleapis.com/stats.PluginConfig"); !ok {
		t.Error("istio.stats not found by its type URL")
	}
	// Istio's filters Strait does not run are not registered: the HCM
	// refuses them by name (hcm.TestBuildRefusesUnknownFilters).
	for _, name := range []string{"istio.alpn", "envoy.filters.http.grpc_stats"} {
		if _, ok := r.Factory(name, ""); ok {
			t.Errorf("%s is registered", name)
		}
	}
	if r.PerRouteParser(fault.Name, "") == nil || r.PerRouteParser(cors.Name, "") == nil || r.PerRouteParser(buffer.Name, "") == nil {
		t.Error("no per-route parser for fault, cors or buffer")
	}
	if r.PerRouteParser("envoy.filters.http.rbac", "") != nil || r.PerRouteParser("other", "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault") != nil {
		t.Error("a per-route parser for a filter that takes none here, or under a key no filter reads")
	}
}

// TestNewRefusesTwoClaims: two factories may not claim one name.
func TestNewRefusesTwoClaims(t *testing.T) {
	if _, err := New(fault.Factory{}, fault.Factory{}); err == nil || !strings.Contains(err.Error(), fault.Name) {
		t.Errorf("New: %v, want an error naming %s", err, fault.Name)
	}
}
