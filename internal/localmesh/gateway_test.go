package localmesh

import (
	"strings"
	"testing"
)

const planGateway = `---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: ingress}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["*"]
  - port: {number: 443, name: tls, protocol: TLS}
    hosts: [secure.example.com]
    tls: {mode: PASSTHROUGH}
`

// TestPlanGatewayPod: a WorkloadEntry that a Gateway selects becomes a
// gateway pod with no app, and the plan lists the servers the host
// reaches on its address; one that a ServiceEntry selects too is refused.
func TestPlanGatewayPod(t *testing.T) {
	dir := writePlanDir(t, map[string]string{
		"se.yaml": planSE + planGateway,
		"we.yaml": we("echo", "demo", "10.77.5.11", "  labels: {app: echo}\n") +
			we("ingressgateway", "ingress", "10.77.5.30", "  labels: {istio: ingressgateway}\n"),
	})
	plan, err := PlanUserConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	var gw, echo *Workload
	for i := range plan.Workloads {
		switch plan.Workloads[i].Name {
		case "ingressgateway":
			gw = &plan.Workloads[i]
		case "echo":
			echo = &plan.Workloads[i]
		}
	}
	if gw == nil || !gw.Gateway || len(gw.App) != 0 || gw.AppPort != 0 {
		t.Fatalf("gateway workload %+v: want Gateway, no app", gw)
	}
	if echo == nil || echo.Gateway {
		t.Fatalf("echo workload %+v is not a sidecar pod", echo)
	}
	var got []string
	for _, s := range plan.Gateways["ingressgateway"] {
		got = append(got, s.String())
	}
	want := []string{
		"HTTP http://10.77.5.30:80 (Gateway ingress/gw, hosts *)",
		"TLS tls://10.77.5.30:443 (Gateway ingress/gw, hosts secure.example.com)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("servers:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(plan.Gateways) != 1 {
		t.Errorf("gateways %v: want only ingressgateway", plan.Gateways)
	}

	// A ServiceEntry that selects the gateway is its Service: the pod
	// stays a gateway with no app.
	dir = writePlanDir(t, map[string]string{
		"se.yaml": planSE + planGateway,
		"we.yaml": we("both", "demo", "10.77.5.11", "  labels: {app: echo, istio: ingressgateway}\n"),
	})
	plan, err = PlanUserConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if w := plan.Workloads[0]; !w.Gateway || len(w.App) != 0 || w.AppPort != 0 {
		t.Errorf("gateway selected by a ServiceEntry %+v: want a gateway pod with no app", w)
	}
}

// outsideWE is a WorkloadEntry annotated as a host outside the mesh.
func outsideWE(annotations, labels string) string {
	return "---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata:\n  name: external\n  namespace: demo\n  annotations: {" + annotations +
		"}\nspec:\n  address: 10.77.5.40\n  labels: {" + labels + "}\n"
}

// TestPlanOutsideMesh: local.strait.io/outside-mesh makes a pod with its
// app and no sidecar; with a ServiceEntry or a Gateway selecting it, or
// without an app, it is refused naming the annotation.
func TestPlanOutsideMesh(t *testing.T) {
	const app = `local.strait.io/app: "strait-echo --addr :8443", `
	for _, tc := range []struct {
		name, annotations, labels, want string
	}{
		{"outside", app + `local.strait.io/outside-mesh: "true"`, "", ""},
		{"selected by a ServiceEntry", app + `local.strait.io/outside-mesh: "true"`, "app: echo", "a ServiceEntry selects this WorkloadEntry"},
		{"selected by a Gateway", app + `local.strait.io/outside-mesh: "true"`, "istio: ingressgateway", "a Gateway selects this WorkloadEntry"},
		{"no app", `local.strait.io/outside-mesh: "true"`, "", "runs the command of metadata.annotations[local.strait.io/app]"},
		{"not a bool", app + `local.strait.io/outside-mesh: "yes"`, "", `is "yes": want "true"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writePlanDir(t, map[string]string{"se.yaml": planSE + planGateway, "we.yaml": outsideWE(tc.annotations, tc.labels)})
			plan, err := PlanUserConfig(dir)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if w := plan.Workloads[0]; !w.OutsideMesh || w.Gateway || len(w.App) == 0 {
				t.Errorf("workload %+v: want OutsideMesh with its app", w)
			}
		})
	}
}
