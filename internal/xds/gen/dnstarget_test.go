package gen_test

import (
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// egressTLSOrigination is istio.io's "Egress TLS Origination" task: the
// application calls http://edition.cnn.com (port 80), and the sidecar
// originates TLS to the host's port 443 (targetPort).
const egressTLSOrigination = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: edition-cnn-com, namespace: default}
spec:
  hosts: [edition.cnn.com]
  ports:
  - {number: 80, name: http-port, protocol: HTTP, targetPort: 443}
  - {number: 443, name: https-port, protocol: HTTPS}
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: dns-rr, namespace: default}
spec:
  hosts: [rr.example.com]
  ports:
  - {number: 8080, name: http, protocol: HTTP, targetPort: 80}
  resolution: DNS_ROUND_ROBIN
`

// TestDNSHostEndpointUsesTargetPort: a DNS ServiceEntry without
// endpoints resolves its host on each port's targetPort when it has one,
// else on the port, as Istio's ServiceEntry conversion makes the host an
// endpoint (convertServiceEntryToInstances: endpointPort = targetPort).
func TestDNSHostEndpointUsesTargetPort(t *testing.T) {
	snap := build(t, storeOf(t, egressTLSOrigination), mesh.BuildOptions{})
	g := gen.NewWithOptions(gen.SourceFunc(func() *mesh.Snapshot { return snap }), gen.Options{KeySets: testKeySets{}})
	proxy, err := proxypush.ParseNodeID("sidecar~10.99.0.10~sleep.default~default.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Generate(proxy, xdsapi.ClusterType, nil, &proxypush.PushRequest{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint32{
		"outbound|80||edition.cnn.com":  443,
		"outbound|443||edition.cnn.com": 443,
		"outbound|8080||rr.example.com": 80,
	}
	for _, r := range res {
		var c cluster.Cluster
		if err := r.GetResource().UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		port, ok := want[c.GetName()]
		if !ok {
			continue
		}
		delete(want, c.GetName())
		lbs := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()
		sa := lbs[0].GetEndpoint().GetAddress().GetSocketAddress()
		if len(lbs) != 1 || sa.GetPortValue() != port {
			t.Errorf("%s: endpoint %s:%d (%d endpoints), want the host on port %d", c.GetName(), sa.GetAddress(), sa.GetPortValue(), len(lbs), port)
		}
	}
	if len(want) > 0 {
		t.Errorf("clusters missing: %v", want)
	}
}
