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

	dir = writePlanDir(t, map[string]string{
		"se.yaml": planSE + planGateway,
		"we.yaml": we("both", "demo", "10.77.5.11", "  labels: {app: echo, istio: ingressgateway}\n"),
	})
	if _, err := PlanUserConfig(dir); err == nil || !strings.Contains(err.Error(), "give the gateway its own WorkloadEntry") {
		t.Errorf("err = %v, want the gateway and service selection refused", err)
	}
}
