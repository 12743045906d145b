package status

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

const appText = `# HELP app_orders_total Orders taken.
# TYPE app_orders_total counter
app_orders_total{kind="book"} 7
`

// appServer serves the app's metrics on loopback with h and returns its
// target and what it was asked.
func appServer(t *testing.T, h http.HandlerFunc) (AppTarget, *atomic.Value) {
	t.Helper()
	var accept atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept.Store(r.Header.Get("Accept"))
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return AppTarget{Port: port, Path: "/metrics"}, &accept
}

func textApp(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	fmt.Fprint(w, appText)
}

func openMetricsApp(version string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/openmetrics-text; version="+version+"; charset=utf-8")
		fmt.Fprint(w, "# TYPE app_orders counter\napp_orders_total{kind=\"book\"} 7\n# EOF\n")
	}
}

func mergeServer(t *testing.T, targets ...AppTarget) *httptest.Server {
	t.Helper()
	var ready atomic.Bool
	admin := fakeAdmin(t, &ready)
	s := New(Options{
		AdminURL:     admin.URL,
		AgentMetrics: func(w io.Writer) error { _, err := fmt.Fprintln(w, "strait_agent_up 1"); return err },
		AppTargets:   targets,
		Logger:       slog.New(slog.DiscardHandler),
	})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// scrape is what Prometheus does: a GET with its Accept header.
func scrape(t *testing.T, url, accept string, hdr ...string) (string, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url+PrometheusPath, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s %s", resp.Status, body)
	}
	return resp.Header.Get("Content-Type"), string(body)
}

// Prometheus 3's Accept header for a scrape job with default settings.
const promAccept = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"

// TestAppMetricsMergedText: over real sockets, the app's text metrics
// come after the proxy's and the agent's, in one exposition Prometheus'
// own parser reads with every family once.
func TestAppMetricsMergedText(t *testing.T) {
	target, accept := appServer(t, textApp)
	srv := mergeServer(t, target)
	ct, body := scrape(t, srv.URL, promAccept)
	if ct != FormatText {
		t.Errorf("Content-Type %q, want %q", ct, FormatText)
	}
	proxyAt, agentAt, appAt := strings.Index(body, "envoy_cluster_upstream_rq_total"), strings.Index(body, "strait_agent_up"), strings.Index(body, "app_orders_total{")
	if proxyAt < 0 || agentAt < proxyAt || appAt < agentAt {
		t.Fatalf("want proxy, agent, then app metrics; got:\n%s", body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("merged exposition does not parse: %v\n%s", err, body)
	}
	if m := fams["app_orders_total"]; m == nil || m.GetMetric()[0].GetCounter().GetValue() != 7 {
		t.Errorf("app_orders_total = %v", m)
	}
	got, _ := accept.Load().(string)
	if !strings.HasPrefix(got, "application/openmetrics-text") || !strings.Contains(got, "text/plain") {
		t.Errorf("the app was asked with Accept %q, want Prometheus' OpenMetrics and text types", got)
	}
}

// TestAppMetricsOpenMetrics: an app answering in OpenMetrics makes the
// response OpenMetrics of its version, ended by one "# EOF".
func TestAppMetricsOpenMetrics(t *testing.T) {
	for _, v := range []string{"1.0.0", "0.0.1"} {
		target, _ := appServer(t, openMetricsApp(v))
		srv := mergeServer(t, target)
		ct, body := scrape(t, srv.URL, promAccept)
		if want := "application/openmetrics-text; version=" + v + "; charset=utf-8"; ct != want {
			t.Errorf("%s: Content-Type %q, want %q", v, ct, want)
		}
		if strings.Count(body, "# EOF") != 1 || !strings.HasSuffix(body, "app_orders_total{kind=\"book\"} 7\n# EOF\n") {
			t.Errorf("%s: want the app last and one final # EOF, got:\n%s", v, body)
		}
	}
}

// TestAppMetricsFailures: an app that is down, answers 500 or hangs past
// Prometheus' scrape timeout is left out and counted; the proxy's and the
// agent's metrics are still served.
func TestAppMetricsFailures(t *testing.T) {
	down, _ := appServer(t, textApp)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	down.Port = port
	failing, _ := appServer(t, func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) })
	hanging, _ := appServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	for name, target := range map[string]AppTarget{"down": down, "500": failing, "hanging": hanging} {
		srv := mergeServer(t, target)
		start := time.Now()
		ct, body := scrape(t, srv.URL, promAccept, "X-Prometheus-Scrape-Timeout-Seconds", "0.3")
		if time.Since(start) > 1500*time.Millisecond {
			t.Errorf("%s: the scrape took %v; the app's part should give up after the 0.3 s scrape timeout", name, time.Since(start))
		}
		if ct != FormatText || !strings.Contains(body, "envoy_cluster_upstream_rq_total") || !strings.Contains(body, "strait_agent_up 1") ||
			!strings.Contains(body, `istio_agent_scrape_failures_total{type="application"} 1`) || strings.Contains(body, "boom") {
			t.Errorf("%s: %q\n%s", name, ct, body)
		}
	}
}

// TestAppMetricsTargets: two targets in order; when their formats differ
// the response falls back to text, without any "# EOF".
func TestAppMetricsTargets(t *testing.T) {
	text, _ := appServer(t, textApp)
	om, _ := appServer(t, openMetricsApp("1.0.0"))
	srv := mergeServer(t, text, om)
	ct, body := scrape(t, srv.URL, promAccept)
	if ct != FormatText || strings.Contains(body, "# EOF") || strings.Index(body, "app_orders_total{") > strings.Index(body, "# TYPE app_orders counter") {
		t.Errorf("mixed targets: %q\n%s", ct, body)
	}
}

func TestAcceptFor(t *testing.T) {
	for _, tc := range []struct {
		accept  string
		allowed []string
		want    string
	}{
		{"", appTypes, "text/plain; version=0.0.4"},
		{"garbage;;", appTypes, "text/plain; version=0.0.4"},
		{"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited", appTypes, "text/plain; version=0.0.4"},
		{"*/*", appTypes, "text/plain; q=0.500; version=0.0.4"},
		{"application/*", appTypes, "application/openmetrics-text; q=0.500; version=0.0.1"},
		{"application/*", proxyTypes, "text/plain; version=0.0.4"},
		{"application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.2", appTypes,
			"application/openmetrics-text; q=0.667; version=1.0.0,text/plain; q=0.333; version=0.0.4"},
		{"application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.2", proxyTypes, "text/plain; q=0.500; version=0.0.4"},
	} {
		if got := acceptFor(tc.accept, tc.allowed); got != tc.want {
			t.Errorf("acceptFor(%q, %v) = %q, want %q", tc.accept, tc.allowed, got, tc.want)
		}
	}
}

func TestResponseFormat(t *testing.T) {
	for ct, want := range map[string]string{
		"":                             FormatText,
		"text/plain; version=0.0.4":    FormatText,
		"application/openmetrics-text": FormatOpenMetrics001,
		"application/openmetrics-text; version=1.0.0": FormatOpenMetrics100,
		"application/openmetrics-text; version=9":     FormatText,
	} {
		if got := responseFormat(ct); got != want {
			t.Errorf("responseFormat(%q) = %q, want %q", ct, got, want)
		}
	}
}
