package kube

import (
	"strings"
	"testing"
	"time"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	statspb "istio.io/api/envoy/extensions/stats"
	telemetryapi "istio.io/api/telemetry/v1alpha1"
	telemetryv1 "istio.io/client-go/pkg/apis/telemetry/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestTelemetry: a Telemetry created through the API (telemetry.istio.io)
// reaches the server's virtualInbound: disabling REQUEST_COUNT on the
// SERVER side makes its istio.stats drop istio_requests_total; deleting
// it restores every metric.
func TestTelemetry(t *testing.T) {
	env := sharedEnv(t)
	f := newFixture(t, env, "telemetry")
	node := f.pod("server", "10.200.9.1", map[string]string{"app": "server", "security.istio.io/tlsMode": "istio"})
	f.service("server", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)})
	f.endpoints("server", "http", 8080, []string{"10.200.9.1"}, nil)
	p := startPlane(t, env.Config, Options{})
	c := dialADS(t, p.addr, node)
	c.subscribe(t, xdsapi.ClusterType)
	c.subscribe(t, xdsapi.ListenerType)

	// dropped lists the metrics the inbound HCMs' istio.stats drop
	// ("none" with istio.stats and no drops, "" without an inbound HCM).
	dropped := func() string {
		r := c.latestOf(xdsapi.ListenerType)
		if r == nil {
			return ""
		}
		var out []string
		for _, a := range r.Resources {
			var l listener.Listener
			if a.UnmarshalTo(&l) != nil || l.Name != "virtualInbound" {
				continue
			}
			for _, fc := range l.FilterChains {
				for _, nf := range fc.GetFilters() {
					var h hcm.HttpConnectionManager
					if nf.GetTypedConfig().UnmarshalTo(&h) != nil {
						continue
					}
					for _, hf := range h.GetHttpFilters() {
						var sc statspb.PluginConfig
						if hf.GetName() != "istio.stats" || hf.GetTypedConfig().UnmarshalTo(&sc) != nil {
							continue
						}
						d := "none"
						for _, m := range sc.GetMetrics() {
							if m.GetDrop() {
								d = m.GetName()
							}
						}
						out = append(out, d)
					}
				}
			}
		}
		if len(out) == 0 {
			return ""
		}
		for _, d := range out[1:] {
			if d != out[0] {
				return strings.Join(out, ",")
			}
		}
		return out[0]
	}
	is := func(want string) func() bool { return func() bool { return dropped() == want } }
	c.wait(t, "every metric recorded", 10*time.Second, is("none"))

	api := f.istio.TelemetryV1().Telemetries(f.ns)
	tel := &telemetryv1.Telemetry{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: f.ns}}
	tel.Spec.Metrics = []*telemetryapi.Metrics{{Overrides: []*telemetryapi.MetricsOverrides{{
		Match:    &telemetryapi.MetricSelector{MetricMatch: &telemetryapi.MetricSelector_Metric{Metric: telemetryapi.MetricSelector_REQUEST_COUNT}, Mode: telemetryapi.WorkloadMode_SERVER},
		Disabled: wrapperspb.Bool(true),
	}}}}
	if _, err := api.Create(f.ctx, tel, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.wait(t, "requests_total dropped", 10*time.Second, is("requests_total"))

	if err := api.Delete(f.ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.wait(t, "every metric recorded again", 10*time.Second, is("none"))
}
