package e2e

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
	"github.com/straitmesh/strait/internal/testreq"
)

// The load of TestPrometheusDashboards: slow successes and fast 500s
// (strait-echo's x-echo-delay and x-echo-status; 500 is not retried by
// Istio's default retry policy).
const (
	dashSlow   = 10
	dashFailed = 2
	// Istio's duration buckets: (100, 250] ms, with room above the delay
	// for a loaded machine (a 60 ms delay in (50, 100] went over it under
	// load 19 in CI).
	dashSlowDelay = "110ms"
	dashTCP       = 3 // connections to the TCP service, each writing tcpRequestBytes
)

// tcpRequestBytes is what each TCP connection of the load writes: a
// request strait-echo answers, then closes.
const tcpRequestBytes = "GET /tcp HTTP/1.1\r\nHost: echo-tcp\r\nConnection: close\r\n\r\n"

// tcpRequest opens a connection from the client pod to the TCP service
// echo-tcp (through the client's sidecar), writes tcpRequestBytes and
// reads the answer to the end.
func tcpRequest(ctx context.Context, t *testing.T, client *localmesh.Pod) {
	t.Helper()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := client.DialContext(dctx, "tcp", "240.240.0.11:9000")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, tcpRequestBytes); err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(conn)
	if err != nil || !strings.HasPrefix(string(body), "HTTP/1.1 200") {
		t.Fatalf("TCP request: %v %q", err, body)
	}
}

// dashQuery is a panel of Istio's Grafana dashboards
// (manifests/addons/dashboards in Istio's source), its Grafana variables
// filled in and irate/rate over $__rate_interval turned into increase
// over the load's window, so the figures are counts, not rates.
type dashQuery struct {
	dashboard, panel, expr string
	// reporter says whose scrapes bound the window.
	reporter string
	check    func(v float64) error
}

func exactly(want float64) func(float64) error {
	return func(v float64) error {
		if math.Abs(v-want) > 1e-6 {
			return fmt.Errorf("%v, want %v", v, want)
		}
		return nil
	}
}

func within(lo, hi float64) func(float64) error {
	return func(v float64) error {
		if v < lo || v > hi {
			return fmt.Errorf("%v, want within [%v, %v]", v, lo, hi)
		}
		return nil
	}
}

// TestPrometheusDashboards: a real Prometheus (Debian's package) scrapes a
// local mesh's agents on 15020 while a known load runs (dashSlow slow 200s
// and dashFailed fast 500s from client to echo), then the queries of
// Istio's mesh, service and workload dashboards return the exact request
// counts and success rate, and P50/P90/P99 inside the bucket of the slow
// requests.
func TestPrometheusDashboards(t *testing.T) {
	requireMesh(t)
	bin := "/usr/bin/prometheus"
	if p, err := exec.LookPath("prometheus"); err == nil {
		bin = p
	} else if _, err := exec.LookPath(bin); err != nil {
		testreq.Missing(t, "no prometheus binary (make deps installs Debian's prometheus package)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "telemetry", localmesh.Options{SecureXDS: true, Workloads: []localmesh.Workload{
		{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
		echoPod("echo-v1", "demo", "10.99.0.11", "v1"),
		echoPod("raw", "demo", "10.99.0.12", "raw"),
	}})
	prom, err := localmesh.StartPrometheus(ctx, localmesh.PrometheusOptions{Binary: bin, Targets: m.MeshTargets(), ScrapeInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer prom.Close()

	c := m.Pod("client").NewHTTPClient(false)
	waitOK(ctx, t, c, localmesh.DemoURL)
	fail := http.Header{"X-Echo-Status": {"500"}}
	if r := send(ctx, c, "GET", localmesh.DemoURL, "", fail); r.err != nil || r.status != 500 {
		t.Fatalf("warm-up 500: %v", r)
	}
	client := m.Pod("client")
	tcpRequest(ctx, t, client) // the TCP series exists before the load too
	checkDashboards(ctx, t, prom, dashboardLoad{
		sourceSel:  `istio_requests_total{reporter="source",destination_service="echo.demo.svc.cluster.local"}`,
		destSel:    `istio_requests_total{reporter="destination",destination_workload="echo-v1"}`,
		tcpSel:     `istio_tcp_received_bytes_total{reporter="source",destination_service="echo-tcp.demo.svc.cluster.local"}`,
		tcpService: "echo-tcp.demo.svc.cluster.local",
		service:    "echo.demo.svc.cluster.local",
		namespace:  "demo",
		workloads:  "echo-v1",
		send: func(delay string, n int, status int) {
			h := http.Header{}
			if delay != "" {
				h.Set("X-Echo-Delay", delay)
			}
			if status != 0 {
				h.Set("X-Echo-Status", fmt.Sprint(status))
			}
			for range n {
				want := 200
				if status != 0 {
					want = status
				}
				if r := send(ctx, c, "GET", localmesh.DemoURL, "", h); r.err != nil || r.status != want {
					t.Fatalf("load: %v", r)
				}
			}
		},
		tcp: func() { tcpRequest(ctx, t, client) },
	})
}

// dashboardLoad is what checkDashboards needs of a mesh: the series each
// reporter's window is bounded by (both the 200 and the 500 series must
// exist before the load), the service and workloads the dashboards are
// filtered on, and how to send the load (n requests with an echo delay or
// status) and, when tcpSel is set, one TCP connection of tcpRequestBytes.
type dashboardLoad struct {
	sourceSel, destSel, tcpSel string
	service, namespace         string
	tcpService                 string
	workloads                  string // a regex of destination workloads
	send                       func(delay string, n, status int)
	tcp                        func()
}

// checkDashboards sends the load (dashSlow slow successes, dashFailed
// 500s, dashTCP TCP connections) and checks that the queries of Istio's
// mesh, service and workload dashboards, evaluated by prom over the
// load's window, return the exact counts and success rate and P50/P90/P99
// inside the slow requests' bucket.
func checkDashboards(ctx context.Context, t *testing.T, prom *localmesh.Prometheus, d dashboardLoad) {
	t.Helper()
	// Both series (200 and 500) of each reporter exist before the load,
	// and t1 is a scrape that saw them: the window [t1, t2] then holds
	// exactly the load. Each agent is scraped at its own moments, so each
	// reporter has its own window.
	type window struct {
		sel          string
		series       int
		load         float64
		t1, t2       time.Time
		before       float64
		rangeSeconds string
	}
	windows := map[string]*window{
		"source":      {sel: d.sourceSel, series: 2, load: dashSlow + dashFailed},
		"destination": {sel: d.destSel, series: 2, load: dashSlow + dashFailed},
	}
	if d.tcpSel != "" {
		windows["tcp"] = &window{sel: d.tcpSel, series: 1, load: dashTCP * float64(len(tcpRequestBytes))}
	}
	for _, w := range windows {
		w.t1, w.before = scrapeAfter(ctx, t, prom, w.sel, time.Now(), func(series int, _ float64) bool { return series == w.series })
	}
	d.send(dashSlowDelay, dashSlow, 0)
	d.send("", dashFailed, 500)
	if d.tcpSel != "" {
		for range dashTCP {
			d.tcp()
		}
	}
	// The window [t1, t2] starts and ends on a scrape: Prometheus 2 (Debian
	// bookworm's 2.42) includes both ends of a range, so increase() is the
	// exact difference, with no extrapolation.
	for name, w := range windows {
		w.t2, _ = scrapeAfter(ctx, t, prom, w.sel, w.t1.Add(time.Millisecond), func(_ int, sum float64) bool { return sum >= w.before+w.load })
		w.rangeSeconds = fmt.Sprintf("%dms", w.t2.Sub(w.t1).Milliseconds())
		t.Logf("%s: load window %s from %s", name, w.rangeSeconds, w.t1.Format(time.RFC3339Nano))
	}

	const total = dashSlow + dashFailed
	svc := `destination_service="` + d.service + `"`
	wl := `destination_workload_namespace=~"` + d.namespace + `",destination_workload=~"` + d.workloads + `"`
	quantile := func(q string, filter string) string {
		return "(histogram_quantile(" + q + ", sum(irate(istio_request_duration_milliseconds_bucket{" + filter + "}[$__rate_interval])) by (le)) / 1000) or histogram_quantile(" + q + ", sum(irate(istio_request_duration_seconds_bucket{" + filter + "}[$__rate_interval])) by (le))"
	}
	slowBucket := within(0.100, 0.250) // seconds: the dashboards divide by 1000
	queries := []dashQuery{
		{"istio-mesh-dashboard", "Global Request Volume", `round(sum (rate(istio_requests_total{reporter=~"source|waypoint"}[$__rate_interval])), 0.01)`, "source", exactly(total)},
		{"istio-mesh-dashboard", "Global Success Rate (non-5xx responses)",
			`sum (rate(istio_requests_total{reporter=~"source|waypoint",response_code!~"5.."}[$__rate_interval])) / sum (rate(istio_requests_total{reporter=~"source|waypoint"}[$__rate_interval]))`, "source", exactly(float64(dashSlow) / total)},
		{"istio-mesh-dashboard", "5xxs", `round(sum (rate(istio_requests_total{reporter=~"source|waypoint",response_code=~"5.."}[$__rate_interval])), 0.01)or vector(0)`, "source", exactly(dashFailed)},
		{"istio-service-dashboard", "Client Request Volume ($qrep=source)", `round(sum(irate(istio_requests_total{reporter=~"source",` + svc + `}[$__rate_interval])), 0.001)`, "source", exactly(total)},
		{"istio-service-dashboard", "Client Success Rate (non-5xx responses)",
			`sum(irate(istio_requests_total{reporter=~"source",` + svc + `,response_code!~"5.*"}[$__rate_interval])) / (sum(irate(istio_requests_total{reporter=~"source",` + svc + `}[$__rate_interval])) or on () vector(1))`, "source", exactly(float64(dashSlow) / total)},
		{"istio-service-dashboard", "Client Request Duration P50", quantile("0.50", `reporter=~"source",`+svc), "source", slowBucket},
		{"istio-service-dashboard", "Client Request Duration P90", quantile("0.90", `reporter=~"source",`+svc), "source", slowBucket},
		{"istio-service-dashboard", "Client Request Duration P99", quantile("0.99", `reporter=~"source",`+svc), "source", slowBucket},
		{"istio-workload-dashboard", "Incoming Request Volume ($qrep=destination)", `round(sum(irate(istio_requests_total{reporter=~"destination",` + wl + `}[$__rate_interval])), 0.001)`, "destination", exactly(total)},
		{"istio-workload-dashboard", "Incoming Success Rate (non-5xx responses)",
			`sum(irate(istio_requests_total{reporter=~"destination",` + wl + `,response_code!~"5.*"}[$__rate_interval])) / sum(irate(istio_requests_total{reporter=~"destination",` + wl + `}[$__rate_interval]))`, "destination", exactly(float64(dashSlow) / total)},
		{"istio-workload-dashboard", "Request Duration P50", quantile("0.50", `reporter=~"destination",destination_workload=~"`+d.workloads+`", destination_workload_namespace=~"`+d.namespace+`"`), "destination", slowBucket},
		{"istio-workload-dashboard", "Request Duration P99", quantile("0.99", `reporter=~"destination",destination_workload=~"`+d.workloads+`", destination_workload_namespace=~"`+d.namespace+`"`), "destination", slowBucket},
	}
	if d.tcpSel != "" {
		queries = append(queries, dashQuery{"istio-service-dashboard", "TCP Received Bytes ($qrep=source)",
			`sum(irate(istio_tcp_received_bytes_total{reporter=~"source", destination_service="` + d.tcpService + `"}[$__rate_interval]))`,
			"tcp", exactly(dashTCP * float64(len(tcpRequestBytes)))})
	}
	for _, q := range queries {
		w := windows[q.reporter]
		expr := strings.NewReplacer("irate(", "increase(", "rate(", "increase(", "$__rate_interval", w.rangeSeconds).Replace(q.expr)
		res, err := prom.Query(ctx, expr, w.t2)
		if err != nil {
			t.Errorf("%s / %s: %v", q.dashboard, q.panel, err)
			continue
		}
		if len(res) != 1 || len(res[0].Points) != 1 {
			t.Errorf("%s / %s: %d series for %s, want one value", q.dashboard, q.panel, len(res), expr)
			continue
		}
		v := res[0].Points[0].V
		if err := q.check(v); err != nil {
			t.Errorf("%s / %s = %v", q.dashboard, q.panel, err)
			continue
		}
		t.Logf("%s / %s = %v", q.dashboard, q.panel, v)
	}
}

// scrapeAfter waits for a scrape of sel at or after since that satisfies
// ok (given the number of series and their sum at that scrape) and
// returns its time and the sum.
func scrapeAfter(ctx context.Context, t *testing.T, prom *localmesh.Prometheus, sel string, since time.Time, ok func(series int, sum float64) bool) (time.Time, float64) {
	t.Helper()
	var at time.Time
	var sum float64
	waitFor(ctx, t, 60*time.Second, "a scrape of "+sel, func() error {
		res, err := prom.Query(ctx, sel+"[1m]", time.Time{})
		if err != nil {
			return err
		}
		sums, counts := map[time.Time]float64{}, map[time.Time]int{}
		for _, s := range res {
			for _, p := range s.Points {
				sums[p.T] += p.V
				counts[p.T]++
			}
		}
		found := false
		for ts, v := range sums {
			if !ts.Before(since) && ok(counts[ts], v) && (!found || ts.Before(at)) {
				at, sum, found = ts, v, true
			}
		}
		if !found {
			return fmt.Errorf("no scrape yet (%d series)", len(res))
		}
		return nil
	})
	return at, sum
}
