package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The pod under test: its namespace holds the services, so that a
// Sidecar in it can name them with "./HOST".
const (
	benchNamespace = "bench"
	podName        = "sidecar-0"
)

// mesh is the configuration straitd serves: S ServiceEntries of E static
// endpoints (one file each, as bench/xds writes them), the pod's
// WorkloadEntry and, when scope > 0, a Sidecar whose egress lists the
// first scope services.
type mesh struct {
	dir                 string
	services, endpoints int
	scope               int // 0: no Sidecar, every service in scope
	podIP               string
}

func (m *mesh) svcHost(i int) string {
	return fmt.Sprintf("svc-%d.%s.svc.cluster.local", i, benchNamespace)
}

func (m *mesh) serviceYAML(i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc-%d, namespace: %s}
spec:
  hosts: [%s]
  addresses: [240.%d.%d.%d]
  ports: [{number: 80, name: http}]
  location: MESH_INTERNAL
  resolution: STATIC
  endpoints:
`, i, benchNamespace, m.svcHost(i), 1+i/62500, (i/250)%250, i%250+1)
	for e := range m.endpoints {
		fmt.Fprintf(&b, "  - {address: 10.%d.%d.%d}\n", 1+i/250, i%250, e+1)
	}
	return b.String()
}

func (m *mesh) write() error {
	for i := range m.services {
		if err := os.WriteFile(filepath.Join(m.dir, fmt.Sprintf("svc-%d.yaml", i)), []byte(m.serviceYAML(i)), 0o644); err != nil {
			return err
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: %s, namespace: %s}\nspec: {address: %s, labels: {app: %s}, serviceAccount: default}\n",
		podName, benchNamespace, m.podIP, podName)
	if m.scope > 0 {
		fmt.Fprintf(&b, "---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: default, namespace: %s}\nspec:\n  egress:\n  - hosts:\n", benchNamespace)
		for i := range min(m.scope, m.services) {
			fmt.Fprintf(&b, "    - ./%s\n", m.svcHost(i))
		}
	}
	return os.WriteFile(filepath.Join(m.dir, "pod.yaml"), []byte(b.String()), 0o644)
}
