package gen_test

import (
	"path/filepath"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/straitmesh/strait/internal/model"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestTCPSourceLabelsPerProxy: a tcp route matched on sourceLabels applies
// to the proxy whose workload has them and not to another proxy of the
// same scope, both through the shared-resource cache (Generate) and the
// direct build (BuildListeners).
func TestTCPSourceLabelsPerProxy(t *testing.T) {
	g, _ := newGenerator(t, filepath.Join("testdata", "filters"))
	for id, want := range map[string]string{
		"sidecar~10.97.0.10~client.app~app.svc.cluster.local": "outbound|5433|v2|db.app.svc.cluster.local",
		"sidecar~10.97.0.11~other.app~app.svc.cluster.local":  "outbound|5433||db.app.svc.cluster.local",
	} {
		proxy, err := model.ParseNodeID(id)
		if err != nil {
			t.Fatal(err)
		}
		res, err := g.Generate(proxy, xdsapi.ListenerType, nil, &model.PushRequest{Full: true})
		if err != nil {
			t.Fatal(err)
		}
		var generated []*listener.Listener
		for _, r := range res {
			var l listener.Listener
			if err := r.Resource.UnmarshalTo(&l); err != nil {
				t.Fatal(err)
			}
			generated = append(generated, &l)
		}
		for how, ls := range map[string][]*listener.Listener{"Generate": generated, "BuildListeners": g.BuildListeners(proxy)} {
			if got := clusterOf(t, ls, "240.240.2.3_5433"); got != want {
				t.Errorf("%s %s: 240.240.2.3_5433 goes to %q, want %q", how, proxy.PodName, got, want)
			}
		}
	}
}

// clusterOf is the cluster of a listener's only filter chain.
func clusterOf(t *testing.T, ls []*listener.Listener, name string) string {
	t.Helper()
	for _, l := range ls {
		if l.Name != name {
			continue
		}
		if len(l.FilterChains) != 1 {
			t.Fatalf("%s has %d filter chains", name, len(l.FilterChains))
		}
		var tp tcpproxy.TcpProxy
		if err := l.FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(&tp); err != nil {
			t.Fatal(err)
		}
		return tp.GetCluster()
	}
	t.Fatalf("no listener %s", name)
	return ""
}
