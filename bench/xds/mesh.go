package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// mesh is a generated configuration: S services of E endpoints spread over
// K namespaces, each namespace limited to itself by a Sidecar (Istio's
// recommended practice at scale), and N proxies as WorkloadEntries spread
// over the same namespaces; and G gateway proxies (Istio's ingress
// gateway: router node ids in istio-system, labelled istio:
// ingressgateway) that one Gateway selects.
type mesh struct {
	dir                          string
	services, endpoints, proxies int
	namespaces                   int
	scoped                       bool
	gateways                     int
}

// gatewayNS is the namespace of the gateway proxies and their Gateway.
const gatewayNS = "istio-system"

func (m *mesh) gatewayIP(i int) string { return fmt.Sprintf("10.201.%d.%d", i/250, i%250+1) }
func (m *mesh) gatewayNodeID(i int) string {
	return fmt.Sprintf("router~%s~gateway-%d.%s~%s.svc.cluster.local", m.gatewayIP(i), i, gatewayNS, gatewayNS)
}

// gatewayMeta is the node metadata of gateway proxy i.
func (m *mesh) gatewayMeta(i int) map[string]any {
	return map[string]any{
		"NAMESPACE":       gatewayNS,
		"CLUSTER_ID":      "Kubernetes",
		"ISTIO_VERSION":   "1.31.0",
		"NAME":            fmt.Sprintf("gateway-%d", i),
		"LABELS":          map[string]any{"istio": "ingressgateway", "app": "istio-ingressgateway"},
		"INSTANCE_IPS":    m.gatewayIP(i),
		"SERVICE_ACCOUNT": "istio-ingressgateway-service-account",
	}
}

func (m *mesh) ns(i int) string      { return fmt.Sprintf("ns-%d", i%m.namespaces) }
func (m *mesh) svcName(i int) string { return fmt.Sprintf("svc-%d", i) }
func (m *mesh) svcHost(i int) string {
	return fmt.Sprintf("%s.%s.svc.cluster.local", m.svcName(i), m.ns(i))
}
func (m *mesh) proxyIP(i int) string { return fmt.Sprintf("10.200.%d.%d", i/250, i%250+1) }
func (m *mesh) proxyNS(i int) string { return m.ns(i) }
func (m *mesh) nodeID(i int) string {
	return fmt.Sprintf("sidecar~%s~proxy-%d.%s~%s.svc.cluster.local", m.proxyIP(i), i, m.proxyNS(i), m.proxyNS(i))
}

// endpointIP is endpoint e of service s; generation g shifts the last one
// so that an endpoints change is a new address.
func endpointIP(s, e, g int) string { return fmt.Sprintf("10.%d.%d.%d", 1+s/250, s%250, e+1+g*100) }

func (m *mesh) serviceYAML(i, generation int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: %s, namespace: %s}
spec:
  hosts: [%s]
  addresses: [240.%d.%d.%d]
  ports: [{number: 80, name: http}]
  location: MESH_INTERNAL
  resolution: STATIC
  endpoints:
`, m.svcName(i), m.ns(i), m.svcHost(i), 1+i/62500, (i/250)%250, i%250+1)
	for e := range m.endpoints {
		g := 0
		if e == m.endpoints-1 {
			g = generation
		}
		fmt.Fprintf(&b, "  - {address: %s}\n", endpointIP(i, e, g))
	}
	return b.String()
}

func (m *mesh) write() error {
	for i := range m.services {
		if err := m.writeFile(fmt.Sprintf("svc-%d.yaml", i), m.serviceYAML(i, 0)); err != nil {
			return err
		}
	}
	var b strings.Builder
	for i := range m.proxies {
		fmt.Fprintf(&b, "---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: proxy-%d, namespace: %s}\nspec: {address: %s, labels: {app: proxy-%d}}\n",
			i, m.proxyNS(i), m.proxyIP(i), i)
	}
	for i := range m.gateways {
		fmt.Fprintf(&b, "---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: gateway-%d, namespace: %s}\nspec: {address: %s, serviceAccount: istio-ingressgateway-service-account, labels: {istio: ingressgateway, app: istio-ingressgateway}}\n",
			i, gatewayNS, m.gatewayIP(i))
	}
	if m.gateways > 0 {
		fmt.Fprintf(&b, "---\napiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: bench-gw, namespace: %s}\nspec:\n  selector: {istio: ingressgateway}\n  servers:\n  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: [\"*\"]\n", gatewayNS)
	}
	if m.scoped {
		for n := range m.namespaces {
			fmt.Fprintf(&b, "---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: default, namespace: ns-%d}\nspec:\n  egress: [{hosts: [\"./*\"]}]\n", n)
		}
	}
	return m.writeFile("proxies.yaml", b.String())
}

// writeFile writes atomically (rename), as a config management tool would.
func (m *mesh) writeFile(name, content string) error {
	tmp := filepath.Join(m.dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(m.dir, name))
}

// dependents returns how many proxies may reach service i.
func (m *mesh) dependents(i int) int {
	if !m.scoped {
		return m.proxies
	}
	n := 0
	for p := range m.proxies {
		if m.proxyNS(p) == m.ns(i) {
			n++
		}
	}
	return n
}

func (m *mesh) virtualServiceYAML(i, rep int) string {
	return fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: %s, namespace: %s}
spec:
  hosts: [%s]
  http:
  - name: %s
    timeout: 7s
    route:
    - destination: {host: %s}
`, m.svcName(i), m.ns(i), m.svcHost(i), vsMarker(rep), m.svcHost(i))
}

// gatewayVirtualServiceYAML is the VirtualService bound to the gateways
// only (gateways: [istio-system/bench-gw]), routing a host of its own to
// service i, with repetition rep's route name.
func (m *mesh) gatewayVirtualServiceYAML(i, rep int) string {
	return fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: bench-gw-routes, namespace: %s}
spec:
  hosts: [bench.example.com]
  gateways: [%s/bench-gw]
  http:
  - name: %s
    timeout: 7s
    route:
    - destination: {host: %s}
`, gatewayNS, gatewayNS, gwMarker(rep), m.svcHost(i))
}

// gwMarker is the route name of the gateway VirtualService of repetition
// rep, which the gateways look for in their routes.
func gwMarker(rep int) string { return fmt.Sprintf("benchgw-r%03d", rep) }

// vsMarker is the route name of the VirtualService of repetition rep,
// which the proxies look for in their routes.
func vsMarker(rep int) string { return fmt.Sprintf("benchvs-r%03d", rep) }

// nodeMeta is the node metadata a sidecar sends (what pilot-agent puts in
// Envoy's bootstrap): Istio needs NAMESPACE, CLUSTER_ID, ISTIO_VERSION and
// LABELS; straitd ignores what it does not use.
func (m *mesh) nodeMeta(i int) map[string]any {
	return map[string]any{
		"NAMESPACE":         m.proxyNS(i),
		"CLUSTER_ID":        "Kubernetes",
		"ISTIO_VERSION":     "1.31.0",
		"NAME":              fmt.Sprintf("proxy-%d", i),
		"LABELS":            map[string]any{"app": fmt.Sprintf("proxy-%d", i)},
		"INSTANCE_IPS":      m.proxyIP(i),
		"SERVICE_ACCOUNT":   "default",
		"INTERCEPTION_MODE": "REDIRECT",
	}
}
