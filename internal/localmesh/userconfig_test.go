package localmesh

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const planSE = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: demo}
spec:
  hosts: [echo.demo.svc.cluster.local]
  addresses: [240.240.0.10]
  ports:
  - {number: 80, name: http, protocol: HTTP, targetPort: 8080}
  - {number: 9090, name: metrics, protocol: HTTP}
  location: MESH_INTERNAL
  resolution: STATIC
  workloadSelector: {labels: {app: echo}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: other, namespace: prod}
spec:
  hosts: [other.prod.svc.cluster.local]
  ports:
  - {number: 81, name: http, protocol: HTTP}
  location: MESH_INTERNAL
  resolution: STATIC
  workloadSelector: {labels: {app: echo}}
`

func we(name, ns, addr, extra string) string {
	return "---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec:\n  address: " + addr + "\n" + extra
}

func writePlanDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestPlanUserConfig(t *testing.T) {
	dir := writePlanDir(t, map[string]string{
		"se.yaml": planSE,
		"we.yml": we("echo-v2", "demo", "10.77.5.12", "  labels: {app: echo, version: v2}\n  serviceAccount: echo-sa\n  ports: {http: 8082}\n") +
			we("client", "demo", "10.77.5.10", "  labels: {app: client}\n") +
			strings.Replace(we("tool", "demo", "10.77.5.20", "  labels: {app: tool}\n"),
				"namespace: demo}", "namespace: demo, annotations: {local.strait.io/app: \"/bin/sleep 1000\", local.strait.io/app-as-root: \"true\"}}", 1),
		"notes.txt": "not yaml",
	})
	plan, err := PlanUserConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Subnet != netip.MustParsePrefix("10.77.5.0/24") {
		t.Errorf("subnet %s", plan.Subnet)
	}
	var names []string
	for _, w := range plan.Workloads {
		names = append(names, w.Namespace+"/"+w.Name+"@"+w.IP.String())
	}
	if want := []string{"demo/client@10.77.5.10", "demo/echo-v2@10.77.5.12", "demo/tool@10.77.5.20"}; !slices.Equal(names, want) {
		t.Fatalf("pods %v, want %v", names, want)
	}
	client, echo, tool := plan.Workloads[0], plan.Workloads[1], plan.Workloads[2]
	if len(client.App) != 0 || client.AppPort != 0 {
		t.Errorf("client selected by no ServiceEntry runs %v on %d, want no app", client.App, client.AppPort)
	}
	// The WorkloadEntry's own port for "http", the number for "metrics";
	// the ServiceEntry of another namespace does not select it.
	if want := []string{"strait-echo", "--addr", ":8082,:9090", "--version", "v2"}; !slices.Equal(echo.App, want) {
		t.Errorf("echo app %v, want %v", echo.App, want)
	}
	if echo.AppPort != 8082 || !slices.Equal(plan.Ports["echo-v2"], []int{8082, 9090}) {
		t.Errorf("echo ports %v, waited-for %d", plan.Ports["echo-v2"], echo.AppPort)
	}
	if echo.ServiceAccount != "echo-sa" || echo.serviceAccount() != "echo-sa" || client.serviceAccount() != ServiceAccount {
		t.Errorf("service accounts %q %q", echo.ServiceAccount, client.serviceAccount())
	}
	if plan.Labels["echo-v2"]["version"] != "v2" {
		t.Errorf("labels %v", plan.Labels)
	}
	if want := []string{"/bin/sleep", "1000"}; !slices.Equal(tool.App, want) {
		t.Errorf("annotated app %v, want %v", tool.App, want)
	}
	if !tool.AppAsRoot || echo.AppAsRoot || client.AppAsRoot {
		t.Errorf("app as root: tool %v (annotated true), echo %v, client %v (not annotated)", tool.AppAsRoot, echo.AppAsRoot, client.AppAsRoot)
	}
}

func TestPlanUserConfigTargetPort(t *testing.T) {
	dir := writePlanDir(t, map[string]string{"a.yaml": planSE + we("e", "demo", "10.77.5.3", "  labels: {app: echo}\n")})
	plan, err := PlanUserConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.Ports["e"]; !slices.Equal(got, []int{8080, 9090}) {
		t.Errorf("ports %v, want the targetPort 8080 and the number 9090", got)
	}
	if want := []string{"strait-echo", "--addr", ":8080,:9090", "--version", ""}; !slices.Equal(plan.Workloads[0].App, want) {
		t.Errorf("app %v, want %v", plan.Workloads[0].App, want)
	}
}

func TestPlanUserConfigRefusals(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"no yaml", map[string]string{"x.txt": "hi"}, []string{"no *.yaml or *.yml files"}},
		{"no workload entry", map[string]string{"a.yaml": planSE}, []string{"no WorkloadEntry", "one pod per WorkloadEntry"}},
		{"invalid document", map[string]string{"a.yaml": we("a", "demo", "10.77.5.2", "  weight: -1\n  bogus: 1\n")},
			[]string{"a.yaml", "document 1", "invalid config"}},
		{"ipv6 address", map[string]string{"a.yaml": we("a", "demo", "\"fd00::5\"", "")},
			[]string{"a.yaml", "WorkloadEntry demo/a", "spec.address", "IPv4"}},
		{"two subnets", map[string]string{"a.yaml": we("a", "demo", "10.77.5.2", "") + we("b", "demo", "10.77.6.2", "")},
			[]string{"WorkloadEntry demo/b", "spec.address 10.77.6.2", "outside 10.77.5.0/24", "one /24"}},
		{"host address", map[string]string{"a.yaml": we("a", "demo", "10.77.5.1", "")}, []string{"spec.address 10.77.5.1", "host's address", ".2 to .254"}},
		{"broadcast", map[string]string{"a.yaml": we("a", "demo", "10.77.5.255", "")}, []string{"broadcast"}},
		{"same address", map[string]string{"a.yaml": we("a", "demo", "10.77.5.2", "") + we("b", "demo", "10.77.5.2", "")},
			[]string{"WorkloadEntry demo/b", "also pod a's"}},
		{"same name", map[string]string{"a.yaml": we("a", "demo", "10.77.5.2", "") + we("a", "prod", "10.77.5.3", "")},
			[]string{"metadata.name \"a\"", "rename one"}},
		{"same object in two files", map[string]string{"a.yaml": planSE + we("a", "demo", "10.77.5.2", ""), "b.yaml": planSE},
			[]string{"b.yaml: document 1: metadata.name: duplicate ServiceEntry demo/echo (also in ", "a.yaml: document 1)"}},
		{"hidden file left out", map[string]string{".a.yaml": we("a", "demo", "10.77.5.2", "")}, []string{"no *.yaml or *.yml files"}},
		{"public subnet", map[string]string{"a.yaml": we("a", "demo", "8.8.8.2", "")}, []string{"not a private range"}},
		{"long name", map[string]string{"a.yaml": we(strings.Repeat("n", 33), "demo", "10.77.5.2", "")}, []string{"at most 32"}},
		{"vip outside the service range", map[string]string{"a.yaml": strings.Replace(planSE, "240.240.0.10", "10.96.0.10", 1) + we("a", "demo", "10.77.5.2", "")},
			[]string{"ServiceEntry demo/echo", "spec.addresses[0] 10.96.0.10", "240.240.0.0/16"}},
		{"sidecar port", map[string]string{"a.yaml": strings.Replace(planSE, "targetPort: 8080", "targetPort: 15001", 1) + we("a", "demo", "10.77.5.2", "  labels: {app: echo}\n")},
			[]string{"port 15001", "targetPort"}},
		{"empty app annotation", map[string]string{"a.yaml": strings.Replace(we("a", "demo", "10.77.5.2", ""), "namespace: demo}", "namespace: demo, annotations: {local.strait.io/app: \" \"}}", 1)},
			[]string{"local.strait.io/app", "is empty"}},
		{"app-as-root not a boolean", map[string]string{"a.yaml": strings.Replace(we("a", "demo", "10.77.5.2", ""), "namespace: demo}", "namespace: demo, annotations: {local.strait.io/app-as-root: \"yes\"}}", 1)},
			[]string{"WorkloadEntry demo/a", "metadata.annotations[local.strait.io/app-as-root]", `"yes"`, `want "true"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := PlanUserConfig(writePlanDir(t, c.files))
			if err == nil {
				t.Fatalf("no error, want one with %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestPlanUserConfigAppMetrics: a WorkloadEntry's prometheus.io
// annotations become the agent's ISTIO_PROMETHEUS_ANNOTATIONS, as the
// injector writes it, and the default echo serves its metrics there; a
// port the agent may not scrape is refused with the entry's name.
func TestPlanUserConfigAppMetrics(t *testing.T) {
	withAnno := func(name, addr, annos string) string {
		return strings.Replace(we(name, "demo", addr, "  labels: {app: echo}\n"), "namespace: demo}", "namespace: demo, annotations: {"+annos+"}}", 1)
	}
	dir := writePlanDir(t, map[string]string{"se.yaml": planSE,
		"we.yaml": withAnno("echo", "10.77.5.12", `prometheus.io/port: "9102", prometheus.io/path: /m`) +
			withAnno("nomerge", "10.77.5.13", `prometheus.io/port: "9102", prometheus.istio.io/merge-metrics: "false"`) +
			we("plain", "demo", "10.77.5.14", "  labels: {app: echo}\n")})
	plan, err := PlanUserConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Workload{}
	for _, w := range plan.Workloads {
		got[w.Name] = w
	}
	if w := got["echo"]; w.AppMetrics != `{"scrape":"","path":"/m","port":"9102"}` || !slices.Contains(w.App, "--metrics-addr") || w.App[len(w.App)-1] != ":9102" {
		t.Errorf("echo: AppMetrics %q, app %q", w.AppMetrics, w.App)
	}
	for _, n := range []string{"nomerge", "plain"} {
		if w := got[n]; w.AppMetrics != "" || slices.Contains(w.App, "--metrics-addr") {
			t.Errorf("%s: AppMetrics %q, app %q; want none", n, w.AppMetrics, w.App)
		}
	}
	bad := writePlanDir(t, map[string]string{"se.yaml": planSE, "we.yaml": withAnno("echo", "10.77.5.12", `prometheus.io/port: "15090"`)})
	if _, err := PlanUserConfig(bad); err == nil || !strings.Contains(err.Error(), "reserved for Istio") || !strings.Contains(err.Error(), "echo") {
		t.Errorf("port 15090: %v", err)
	}
}
