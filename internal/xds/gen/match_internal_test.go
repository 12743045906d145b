package gen

import (
	"fmt"
	"testing"

	"github.com/straitmesh/strait/internal/proxypush"
)

// labelsSubset: every label of sub is in of with the same value; a label
// required empty is not satisfied by its absence.
func TestLabelsSubset(t *testing.T) {
	of := map[string]string{"app": "a", "v": "1"}
	for _, tc := range []struct {
		sub  map[string]string
		want bool
	}{
		{nil, true},
		{map[string]string{"app": "a"}, true},
		{map[string]string{"app": "a", "v": "1"}, true},
		{map[string]string{"app": "b"}, false},
		{map[string]string{"app": "a", "v": "2"}, false},
		{map[string]string{"zone": ""}, false},
		{map[string]string{"app": "a", "zone": "z"}, false},
	} {
		if got := labelsSubset(tc.sub, of); got != tc.want {
			t.Errorf("labelsSubset(%v, %v) = %v, want %v", tc.sub, of, got, tc.want)
		}
	}
}

// sourceSelectors: the distinct sourceLabels of the scope's http matches
// that apply to sidecars (no gateways), sorted; matches without
// sourceLabels add none.
func TestSourceSelectors(t *testing.T) {
	snap := localitySnapshot(t, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: s, namespace: ns}
spec:
  hosts: [s.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.1.0.1}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: s, namespace: ns}
spec:
  hosts: [s.example.com]
  http:
  - match:
    - {sourceLabels: {app: z}}
    - {sourceLabels: {app: b}, gateways: [gw]}
    - {uri: {prefix: /x}}
    - {sourceLabels: {app: a, v: "1"}}
    - {sourceLabels: {app: z}}
    route: [{destination: {host: s.example.com}}]
  - route: [{destination: {host: s.example.com}}]
`)
	scope := snap.ProxyScope(&proxypush.Proxy{IP: "10.1.0.9", Namespace: "ns"})
	if got, want := fmt.Sprint(sourceSelectors(snap, scope)), "[map[app:a v:1] map[app:z]]"; got != want {
		t.Errorf("sourceSelectors = %s, want %s", got, want)
	}
}
