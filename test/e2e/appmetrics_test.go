package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/straitmesh/strait/internal/localmesh"
)

// TestAppMetricsMerge: a local mesh whose echo pod declares its app's
// metrics endpoint as a pod would (prometheus.io/port 9102, kept for the
// agent in ISTIO_PROMETHEUS_ANNOTATIONS). After known traffic the echo
// agent's 15020 /stats/prometheus is one exposition Prometheus' parser
// reads, holding the proxy's istio_requests_total, the agent's metrics and
// then the app's own strait_echo_requests_total with the exact counts.
func TestAppMetricsMerge(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	echo := echoPod("echo-v1", "demo", "10.99.0.11", "v1", "--metrics-addr", ":9102")
	echo.AppMetrics = `{"scrape":"true","path":"/metrics","port":"9102"}`
	m := startMesh(ctx, t, "telemetry", localmesh.Options{SecureXDS: true, Workloads: []localmesh.Workload{
		{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
		echo,
	}})
	client, server := m.Pod("client"), m.Pod("echo-v1")
	c := client.NewHTTPClient(false)
	waitOK(ctx, t, c, localmesh.DemoURL)
	before := appCount(ctx, t, server, `code="500"`)
	const n = 3
	for range n {
		if r := send(ctx, c, "GET", localmesh.DemoURL, "", http.Header{"X-Echo-Status": {"500"}}); r.err != nil || r.status != 500 {
			t.Fatalf("request: %v", r)
		}
	}
	if got := appCount(ctx, t, server, `code="500"`); got != before+n {
		t.Errorf("strait_echo_requests_total{code=\"500\"} = %v, want %v", got, before+n)
	}
	body, err := server.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	text := string(body)
	proxyAt := strings.Index(text, "istio_requests_total{")
	agentAt := strings.Index(text, "strait_agent_proxy_restarts_total")
	appAt := strings.Index(text, "strait_echo_requests_total{")
	if proxyAt < 0 || agentAt < proxyAt || appAt < agentAt {
		t.Errorf("want the proxy's, the agent's, then the app's metrics (at %d, %d, %d)", proxyAt, agentAt, appAt)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := p.TextToMetricFamilies(strings.NewReader(text)); err != nil {
		t.Errorf("the merged exposition does not parse: %v", err)
	}
	if !strings.Contains(text, `istio_agent_scrape_failures_total{type="application"} 0`) {
		t.Errorf("app scrape failures counted:\n%s", grepLines(text, "istio_agent_scrape"))
	}
}

// appCount is the value of the app's strait_echo_requests_total line with
// label, read from the pod's merged metrics (0 when absent).
func appCount(ctx context.Context, t *testing.T, p *localmesh.Pod, label string) float64 {
	t.Helper()
	body, err := p.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p2 := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p2.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("merged metrics do not parse: %v", err)
	}
	for _, m := range fams["strait_echo_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName()+`="`+l.GetValue()+`"` == label {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
