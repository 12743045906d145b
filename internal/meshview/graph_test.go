package meshview

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// scrapeOf parses a proxy's metrics text taken at t0+at.
func scrapeOf(t *testing.T, at time.Duration, text string) ProxyScrape {
	t.Helper()
	samples, err := ParseText(strings.NewReader(text), wantedMetric)
	if err != nil {
		t.Fatal(err)
	}
	return ProxyScrape{At: t0.Add(at), Edges: countersFromSamples(samples)}
}

// reqs writes istio_requests_total lines for one edge, reporter and code.
func reqs(reporter, src, dst, code string, n float64) string {
	return fmt.Sprintf(`istio_requests_total{reporter=%q,source_workload=%q,source_workload_namespace="demo",destination_workload=%q,destination_workload_namespace="demo",destination_service_name="svc-%s",response_code=%q,response_flags="-"} %g`+"\n",
		reporter, src, dst, dst, code, n)
}

// buckets writes the duration histogram of one edge: cumulative counts
// for le 1, 5, 10, 25, +Inf.
func buckets(reporter, src, dst string, counts ...float64) string {
	var b strings.Builder
	for i, le := range []string{"1", "5", "10", "25", "+Inf"} {
		fmt.Fprintf(&b, `istio_request_duration_milliseconds_bucket{reporter=%q,source_workload=%q,source_workload_namespace="demo",destination_workload=%q,destination_workload_namespace="demo",response_code="200",le=%q} %g`+"\n",
			reporter, src, dst, le, counts[i])
	}
	return b.String()
}

func TestBuild(t *testing.T) {
	client := Workload{"demo", "client"}
	server := Workload{"demo", "server"}
	tests := []struct {
		name    string
		scrapes func(t *testing.T) map[string][]ProxyScrape
		want    []Edge // Services and Window checked too; P99 to 0.01
	}{
		{
			name: "destination reports: rate, success and p99 from deltas",
			scrapes: func(t *testing.T) map[string][]ProxyScrape {
				return map[string][]ProxyScrape{"server": {
					scrapeOf(t, 0, reqs("destination", "client", "server", "200", 100)+buckets("destination", "client", "server", 10, 50, 100, 100, 100)),
					scrapeOf(t, 5*time.Second, reqs("destination", "client", "server", "200", 130)+buckets("destination", "client", "server", 10, 50, 120, 140, 140)),
					// 100 more requests in 10s, 20 of them 500s; bucket
					// deltas 0, 0, 50, 100, 100: p99 is 10 + 15·49/50.
					scrapeOf(t, 10*time.Second, reqs("destination", "client", "server", "200", 180)+reqs("destination", "client", "server", "500", 20)+
						buckets("destination", "client", "server", 10, 50, 150, 200, 200)),
				}}
			},
			want: []Edge{{EdgeKey: EdgeKey{client, server}, Reporter: "destination", Requests: 100, ServerErrors: 20, Window: 10 * time.Second, Rate: 10, P99: 24.7, Services: []string{"svc-server"}}},
		},
		{
			name: "the destination's report wins over the source's; a source-only edge stays",
			scrapes: func(t *testing.T) map[string][]ProxyScrape {
				return map[string][]ProxyScrape{
					"client": {
						scrapeOf(t, 0, reqs("source", "client", "server", "200", 0)+reqs("source", "client", "ext", "503", 1)),
						scrapeOf(t, 4*time.Second, reqs("source", "client", "server", "200", 40)+reqs("source", "client", "ext", "503", 9)+reqs("source", "client", "ext", "200", 12)),
					},
					"server": {
						scrapeOf(t, 1*time.Second, ""),
						// The server's proxy does not know the service
						// the client addressed: the client's report names it.
						scrapeOf(t, 3*time.Second, strings.ReplaceAll(reqs("destination", "client", "server", "200", 44), `"svc-server"`, `"unknown"`)),
					},
				}
			},
			want: []Edge{
				{EdgeKey: EdgeKey{client, Workload{"demo", "ext"}}, Reporter: "source", Requests: 20, ServerErrors: 8, Window: 4 * time.Second, Rate: 5, P99: math.NaN(), Services: []string{"svc-ext"}},
				{EdgeKey: EdgeKey{client, server}, Reporter: "destination", Requests: 44, Window: 2 * time.Second, Rate: 22, P99: math.NaN(), Services: []string{"svc-server"}},
			},
		},
		{
			name: "two destination proxies of one workload add up",
			scrapes: func(t *testing.T) map[string][]ProxyScrape {
				return map[string][]ProxyScrape{
					"server-a": {scrapeOf(t, 0, reqs("destination", "client", "server", "200", 10)), scrapeOf(t, 10*time.Second, reqs("destination", "client", "server", "200", 30))},
					"server-b": {scrapeOf(t, 0, reqs("destination", "client", "server", "200", 5)), scrapeOf(t, 5*time.Second, reqs("destination", "client", "server", "200", 15)+reqs("destination", "client", "server", "503", 10))},
				}
			},
			want: []Edge{{EdgeKey: EdgeKey{client, server}, Reporter: "destination", Requests: 40, ServerErrors: 10, Window: 10 * time.Second, Rate: 2 + 4, P99: math.NaN(), Services: []string{"svc-server"}}},
		},
		{
			name: "TCP traffic: bytes both ways and connections opened, reset per counter",
			scrapes: func(t *testing.T) map[string][]ProxyScrape {
				tcp := func(sent, received, opened float64) string {
					l := `{reporter="destination",source_workload="client",source_workload_namespace="demo",destination_workload="server",destination_workload_namespace="demo",destination_service_name="svc-server"}`
					return fmt.Sprintf("istio_tcp_sent_bytes_total%s %g\nistio_tcp_received_bytes_total%s %g\nistio_tcp_connections_opened_total%s %g\nistio_tcp_connections_closed_total%s 99\n", l, sent, l, received, l, opened, l)
				}
				return map[string][]ProxyScrape{"server": {
					scrapeOf(t, 0, tcp(1000, 500, 3)),
					scrapeOf(t, 10*time.Second, tcp(4000, 2500, 1)), // connections reset: 1 opened since
				}}
			},
			want: []Edge{{EdgeKey: EdgeKey{client, server}, Reporter: "destination", Window: 10 * time.Second, P99: math.NaN(), Services: []string{"svc-server"},
				TCPBytes: 5000, TCPConnections: 1, ByteRate: 500, ConnectionRate: 0.1}},
		},
		{
			name: "a counter reset counts from zero",
			scrapes: func(t *testing.T) map[string][]ProxyScrape {
				return map[string][]ProxyScrape{"server": {
					scrapeOf(t, 0, reqs("destination", "client", "server", "200", 500)),
					scrapeOf(t, 10*time.Second, reqs("destination", "client", "server", "200", 30)),
				}}
			},
			want: []Edge{{EdgeKey: EdgeKey{client, server}, Reporter: "destination", Requests: 30, Window: 10 * time.Second, Rate: 3, P99: math.NaN(), Services: []string{"svc-server"}}},
		},
		{
			name: "one scrape: no rate yet",
			scrapes: func(t *testing.T) map[string][]ProxyScrape {
				return map[string][]ProxyScrape{"server": {scrapeOf(t, 0, reqs("destination", "client", "server", "200", 500))}}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := Build(tt.scrapes(t))
			if len(g.Edges) != len(tt.want) {
				t.Fatalf("got %d edges %+v, want %d", len(g.Edges), g.Edges, len(tt.want))
			}
			for i, w := range tt.want {
				e := g.Edges[i]
				if e.EdgeKey != w.EdgeKey || e.Reporter != w.Reporter || e.Requests != w.Requests || e.ServerErrors != w.ServerErrors ||
					e.Window != w.Window || math.Abs(e.Rate-w.Rate) > 1e-9 || fmt.Sprint(e.Services) != fmt.Sprint(w.Services) ||
					e.TCPBytes != w.TCPBytes || e.TCPConnections != w.TCPConnections || math.Abs(e.ByteRate-w.ByteRate) > 1e-9 || math.Abs(e.ConnectionRate-w.ConnectionRate) > 1e-9 {
					t.Errorf("edge %d:\ngot  %+v\nwant %+v", i, e, w)
				}
				if math.IsNaN(w.P99) != math.IsNaN(e.P99) || (!math.IsNaN(w.P99) && math.Abs(e.P99-w.P99) > 0.01) {
					t.Errorf("edge %d: p99 %v, want %v", i, e.P99, w.P99)
				}
			}
		})
	}
}

func TestBuildFormats(t *testing.T) {
	g := Build(map[string][]ProxyScrape{"server": {
		scrapeOf(t, 0, reqs("destination", "client", "server", "200", 0)+buckets("destination", "client", "server", 0, 0, 0, 0, 0)),
		scrapeOf(t, 8*time.Second, reqs("destination", "client", "server", "200", 32)+reqs("destination", "client", "server", "503", 8)+buckets("destination", "client", "server", 0, 40, 40, 40, 40)),
	}})
	if len(g.Edges) != 1 || len(g.Nodes) != 2 {
		t.Fatalf("graph %+v", g)
	}
	e := g.Edges[0]
	// 40 requests in 8s, 8 of them 503; all 40 in (1, 5]: p99 at 1 + 4·39.6/40.
	for got, want := range map[string]string{FormatRate(e): "5.00 rps", FormatSuccess(e): "80.0%", FormatP99(e): "5.0 ms", EdgeColour(e): ColourFailing, FormatTCP(e): "-"} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestQuantile(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name    string
		q       float64
		buckets map[float64]float64
		want    float64
	}{
		{"interpolated in a middle bucket", 0.99, map[float64]float64{1: 0, 5: 0, 10: 50, 25: 100, inf: 100}, 24.7},
		{"the first bucket starts at zero", 0.5, map[float64]float64{10: 100, 20: 100, inf: 100}, 5},
		{"a rank in +Inf answers the highest bound", 0.99, map[float64]float64{1: 10, 5: 20, inf: 100}, 5},
		{"median", 0.5, map[float64]float64{1: 25, 5: 75, inf: 100}, 3},
		{"no +Inf bucket", 0.99, map[float64]float64{1: 10, 5: 20}, math.NaN()},
		{"no observation", 0.99, map[float64]float64{1: 0, inf: 0}, math.NaN()},
		{"non-monotonic sums are evened", 0.5, map[float64]float64{1: 60, 5: 50, inf: 100}, 0.8333},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Quantile(tt.q, tt.buckets)
			if math.IsNaN(tt.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tt.want) > 0.001) {
				t.Fatalf("Quantile(%v) = %v, want %v", tt.q, got, tt.want)
			}
		})
	}
}
