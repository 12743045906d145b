package gen_test

import (
	"os"
	"path/filepath"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestHTTP10Metadata: every HCM of a proxy whose metadata HTTP10 is "1"
// (ISTIO_META_HTTP10=1) accepts HTTP/1.0, the shared outbound ones and its
// own inbound ones, through Generate and BuildListeners; any other value,
// or none, leaves accept_http_10 unset (the proxy answers HTTP/1.0 426),
// as Istio's enableHTTP10 reads it. Another proxy of the same scope keeps
// the shared listeners unchanged.
func TestHTTP10Metadata(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "mtls", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	snap := build(t, storeOf(t, string(b)), mesh.BuildOptions{})
	g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
	for _, tc := range []struct {
		name string
		meta map[string]string
		want bool
	}{
		{"HTTP10 1", map[string]string{gen.HTTP10Metadata: "1"}, true},
		{"no metadata", nil, false},
		{"HTTP10 true", map[string]string{gen.HTTP10Metadata: "true"}, false},
		{"HTTP10 1 again after others", map[string]string{gen.HTTP10Metadata: "1"}, true},
		{"no metadata after HTTP10 1", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy, err := proxypush.ParseNodeID("sidecar~10.95.0.11~server.secure~secure.svc.cluster.local")
			if err != nil {
				t.Fatal(err)
			}
			proxy.Metadata = tc.meta
			res, err := g.Generate(proxy, xdsapi.ListenerType, nil, &proxypush.PushRequest{Full: true})
			if err != nil {
				t.Fatal(err)
			}
			var generated []*listener.Listener
			for _, r := range res {
				l := &listener.Listener{}
				if err := r.GetResource().UnmarshalTo(l); err != nil {
					t.Fatal(err)
				}
				generated = append(generated, l)
			}
			for name, ls := range map[string][]*listener.Listener{"Generate": generated, "BuildListeners": g.BuildListeners(proxy)} {
				n := 0
				for _, l := range ls {
					if err := l.ValidateAll(); err != nil {
						t.Errorf("%s: listener %s: %v", name, l.GetName(), err)
					}
					for _, fc := range l.GetFilterChains() {
						for _, f := range fc.GetFilters() {
							if f.GetName() != "envoy.filters.network.http_connection_manager" {
								continue
							}
							n++
							h := &hcm.HttpConnectionManager{}
							if err := f.GetTypedConfig().UnmarshalTo(h); err != nil {
								t.Fatal(err)
							}
							if got := h.GetHttpProtocolOptions().GetAcceptHttp_10(); got != tc.want {
								t.Errorf("%s: %s/%s: accept_http_10 %v, want %v", name, l.GetName(), fc.GetName(), got, tc.want)
							}
						}
					}
				}
				if n < 2 {
					t.Errorf("%s: %d HCMs; the scenario should have inbound and outbound ones", name, n)
				}
			}
		})
	}
}
