package validate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/istioconfig"
)

func TestLocalitySettingsValidated(t *testing.T) {
	for _, c := range []struct {
		name, yaml, want string // want: "" loads; else in the error
		refused          bool
	}{
		{"valid", `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: r, namespace: ns}
spec:
  host: s.ns.svc.cluster.local
  trafficPolicy:
    loadBalancer:
      localityLbSetting:
        distribute: [{from: "us/*", to: {"us/*": 80, "eu/*": 20}}]
`, "", false},
		{"sum in a subset's port-level settings", `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: r, namespace: ns}
spec:
  host: s.ns.svc.cluster.local
  subsets:
  - name: a
    labels: {v: a}
    trafficPolicy:
      portLevelSettings:
      - port: {number: 80}
        loadBalancer:
          localityLbSetting:
            distribute: [{from: us, to: {us: 50}}]
`, "document 1: spec.subsets[0].trafficPolicy.portLevelSettings[0].loadBalancer.localityLbSetting.distribute[0].to: the weights add up to 50", false},
		{"failover to itself", `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: r, namespace: ns}
spec:
  host: s.ns.svc.cluster.local
  trafficPolicy:
    portLevelSettings:
    - port: {number: 80}
      loadBalancer:
        localityLbSetting:
          failover: [{from: us, to: us}]
`, "spec.trafficPolicy.portLevelSettings[0].loadBalancer.localityLbSetting.failover[0]: from and to are both", false},
		{"DNS endpoint locality", `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: e, namespace: ns}
spec:
  hosts: [e.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
  endpoints: [{address: a.example.com, locality: us/a}]
`, "spec.endpoints[0].locality: not supported by Strait yet with resolution DNS", true},
		{"static endpoint locality and weight", `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: e, namespace: ns}
spec:
  hosts: [e.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1, locality: us/a, weight: 3}]
`, "", false},
	} {
		res := istioconfig.ParseFile("x.yaml", []byte(c.yaml))
		switch {
		case c.want == "" && res.Err != nil:
			t.Errorf("%s: %v", c.name, res.Err)
		case c.want != "" && (res.Err == nil || !strings.Contains(res.Err.Error(), c.want)):
			t.Errorf("%s: error %v, want one containing %q", c.name, res.Err, c.want)
		case c.want != "" && errors.Is(res.Err, istioconfig.ErrNotSupported) != c.refused:
			t.Errorf("%s: errors.Is(istioconfig.ErrNotSupported) = %v, want %v", c.name, !c.refused, c.refused)
		}
	}
}
