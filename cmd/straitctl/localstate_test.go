package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/localmesh"
)

func TestLocalStateLifecycle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if _, err := readState(dir); !errors.Is(err, errNoMesh) || !strings.Contains(err.Error(), "straitctl local up") {
		t.Fatalf("no state dir: %v, want errNoMesh", err)
	}
	lock, err := lockState(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Still starting: locked, no state yet.
	if _, err := lockState(dir); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second lock while starting: %v", err)
	}
	if _, err := readState(dir); !errors.Is(err, errNoMesh) {
		t.Fatalf("read before the state is written: %v, want errNoMesh", err)
	}
	want := &localState{PID: 4242, ConfigDir: "/cfg", BinDir: "/bin", MonitoringAddr: "127.0.0.1:1", Bridge: "stbabc",
		Pods: []statePod{{Name: "client", Namespace: "demo", IP: "10.99.0.10", Netns: "/run/netns/x", Labels: map[string]string{"app": "client"}}}}
	if err := lock.write(want); err != nil {
		t.Fatal(err)
	}
	got, err := readState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.PID != 4242 || got.Bridge != "stbabc" || len(got.Pods) != 1 || got.Pods[0].Labels["app"] != "client" || got.Pods[0].Netns != "/run/netns/x" {
		t.Fatalf("read back %+v", got)
	}
	_, err = lockState(dir)
	if err == nil || !strings.Contains(err.Error(), "already running (pid 4242, config /cfg)") || !strings.Contains(err.Error(), "kill -TERM 4242") {
		t.Fatalf("second local up: %v, want a refusal naming the running one", err)
	}
	if err := lock.release(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"state.json", "lock"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left after release: %v", f, err)
		}
	}
	if _, err := readState(dir); !errors.Is(err, errNoMesh) {
		t.Fatalf("after release: %v, want errNoMesh", err)
	}
}

// A state file whose local up died (no lock held) is stale: exec says no
// mesh runs, and the next local up takes over.
func TestLocalStateStale(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(`{"pid":99999999,"configDir":"/cfg"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := readState(dir)
	if !errors.Is(err, errNoMesh) || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("stale state: %v, want errNoMesh saying stale", err)
	}
	lock, err := lockState(dir)
	if err != nil {
		t.Fatalf("local up over a stale state: %v", err)
	}
	defer func() {
		if err := lock.release(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := os.Stat(filepath.Join(dir, "state.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale state.json kept: %v", err)
	}
}

func TestFindPod(t *testing.T) {
	st := &localState{Pods: []statePod{{Name: "client", Namespace: "demo"}, {Name: "db", Namespace: "a"}, {Name: "db", Namespace: "b"}}}
	if p, err := st.findPod("client", ""); err != nil || p.Namespace != "demo" {
		t.Errorf("client: %v %v", p, err)
	}
	if p, err := st.findPod("db", "b"); err != nil || p.Namespace != "b" {
		t.Errorf("db -n b: %v %v", p, err)
	}
	for _, c := range []struct{ name, ns, want string }{
		{"db", "", "several namespaces"},
		{"nope", "", "no pod nope; the local mesh has [demo/client a/db b/db]"},
		{"client", "prod", "no pod client in namespace prod"},
	} {
		if _, err := st.findPod(c.name, c.ns); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("findPod(%q, %q): %v, want %q", c.name, c.ns, err, c.want)
		}
	}
}

func TestServiceHostsLines(t *testing.T) {
	dir := t.TempDir()
	cfg := `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: demo}
spec:
  hosts: [echo.demo.svc.cluster.local, echo.example]
  addresses: [240.240.0.10]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: novip, namespace: demo}
spec:
  hosts: [novip.example]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
`
	if err := os.WriteFile(filepath.Join(dir, "se.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := serviceHostsLines(dir), "240.240.0.10 echo.demo.svc.cluster.local echo.example\n"; got != want {
		t.Errorf("hosts lines %q, want %q", got, want)
	}
}

func TestWithoutTLSModeLabel(t *testing.T) {
	st := &localState{Pods: []statePod{
		{Name: "a", Namespace: "x", Labels: map[string]string{"security.istio.io/tlsMode": "istio"}},
		{Name: "b", Namespace: "x", Labels: map[string]string{"security.istio.io/tlsMode": "disabled"}},
		{Name: "c", Namespace: "y"},
	}}
	if got := withoutTLSModeLabel(st); strings.Join(got, " ") != "x/b y/c" {
		t.Errorf("got %v, want [x/b y/c]", got)
	}
}

func TestSamePodsAndTable(t *testing.T) {
	dir := t.TempDir()
	we := `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: a, namespace: x}
spec: {address: 10.77.9.2, labels: {app: a}}
`
	if err := os.WriteFile(filepath.Join(dir, "we.yaml"), []byte(we), 0o644); err != nil {
		t.Fatal(err)
	}
	plan, err := localmesh.PlanUserConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := &localState{Pods: []statePod{{Name: "a", Namespace: "x", IP: "10.77.9.2", Labels: map[string]string{"app": "a"}}}}
	if !samePods(plan, st) {
		t.Fatal("samePods: false for the plan the state was made from")
	}
	for name, change := range map[string]func(p *statePod){
		"address":   func(p *statePod) { p.IP = "10.77.9.3" },
		"label":     func(p *statePod) { p.Labels = map[string]string{"app": "b"} },
		"namespace": func(p *statePod) { p.Namespace = "y" },
		"ports":     func(p *statePod) { p.Ports = []int{80} },
	} {
		changed := &localState{Pods: []statePod{st.Pods[0]}}
		change(&changed.Pods[0])
		if samePods(plan, changed) {
			t.Errorf("samePods: true after the %s changed", name)
		}
	}
	if samePods(plan, &localState{}) {
		t.Error("samePods: true for a state with no pods")
	}
	var b strings.Builder
	st.Pods = append(st.Pods, statePod{Name: "b", Namespace: "x", IP: "10.77.9.4", Ports: []int{80, 9090}})
	printPods(&b, st, "ready")
	want := "POD  NAMESPACE  ADDRESS    LABELS  PORTS    SIDECAR\n" +
		"a    x          10.77.9.2  app=a   -        ready\n" +
		"b    x          10.77.9.4  -       80,9090  ready\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestDirStamps(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.yaml", "b.yml", "c.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := dirStamps(dir)
	if len(before) != 2 || before["a.yaml"] == "" || before["b.yml"] == "" {
		t.Fatalf("stamps %v, want a.yaml and b.yml", before)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("xy"), 0o644); err != nil {
		t.Fatal(err)
	}
	if after := dirStamps(dir); after["a.yaml"] == before["a.yaml"] || after["b.yml"] != before["b.yml"] {
		t.Errorf("after an edit of a.yaml: %v, before %v", after, before)
	}
}
