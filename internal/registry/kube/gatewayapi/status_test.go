package gatewayapi

import (
	"fmt"
	"testing"
)

// TestGatewayAddresses: the Gateway's Programmed condition and status
// addresses by its deployed Service: none, a pending LoadBalancer, a
// Service without a load balancer (its hostname), load balancer
// addresses (IPv4, IPv6, hostnames).
func TestGatewayAddresses(t *testing.T) {
	for _, tc := range []struct {
		name       string
		svc        *ServiceInfo
		programmed string
		addresses  string
	}{
		{"none", nil, "False AddressNotAssigned Failed to assign to any requested addresses: service infra/gw-istio does not exist yet", "[]"},
		{"pending", &ServiceInfo{Type: "LoadBalancer", Hostname: "gw-istio.infra.svc.cluster.local"},
			`False AddressNotAssigned Assigned to service(s) gw-istio.infra.svc.cluster.local, but failed to assign to all requested addresses: address pending for hostname "gw-istio.infra.svc.cluster.local"`, "[]"},
		{"nodeport", &ServiceInfo{Type: "NodePort", Hostname: "gw-istio.infra.svc.cluster.local"},
			"True Programmed Resource programmed, assigned to service(s) gw-istio.infra.svc.cluster.local", "[Hostname=gw-istio.infra.svc.cluster.local]"},
		{"ingress", &ServiceInfo{Type: "LoadBalancer", Hostname: "gw-istio.infra.svc.cluster.local", Ingress: []string{"192.0.2.1", "2001:db8::1", "lb.example.com"}},
			"True Programmed Resource programmed, assigned to service(s) gw-istio.infra.svc.cluster.local", "[IPAddress=192.0.2.1 IPAddress=2001:db8::1 Hostname=lb.example.com]"},
		{"clusterip ingress", &ServiceInfo{Type: "ClusterIP", Hostname: "h", Ingress: []string{"192.0.2.2"}},
			"True Programmed Resource programmed, assigned to service(s) h", "[IPAddress=192.0.2.2]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := objects(t, gwHeader+"  - {name: http, port: 80, protocol: HTTP}\n")
			in.DeployedService = func(ns, name string) *ServiceInfo {
				if ns != "infra" || name != "gw-istio" {
					t.Errorf("DeployedService(%s, %s)", ns, name)
				}
				return tc.svc
			}
			st := Translate(in).Gateways[Ref{"Gateway", "infra", "gw"}]
			c := cond(st.Conditions, "Programmed")
			if got := fmt.Sprintf("%s %s %s", c.Status, c.Reason, c.Message); got != tc.programmed || c.ObservedGeneration != 2 {
				t.Errorf("Programmed: %s (generation %d), want %s", got, c.ObservedGeneration, tc.programmed)
			}
			var addrs []string
			for _, a := range st.Addresses {
				addrs = append(addrs, fmt.Sprintf("%s=%s", *a.Type, a.Value))
			}
			if got := fmt.Sprint(addrs); got != tc.addresses {
				t.Errorf("addresses: %s, want %s", got, tc.addresses)
			}
		})
	}
}
