package stats

import (
	"strings"
	"sync"
	"testing"
)

// filled returns a store with one of each kind of metric.
func filled() *Store {
	s := New()
	c := s.Cluster("outbound|80||echo.demo.svc.cluster.local")
	c.RqTotal.Add(3)
	c.CxTotal.Add(2)
	c.CxConnectFail.Add(1)
	c.AddResponse(200)
	c.AddResponse(200)
	c.AddResponse(503)
	c.AddResponse(0)   // not a status code: ignored
	c.AddResponse(999) // out of range: ignored
	c.Router.Retry.Add(6)
	c.Router.RetrySuccess.Add(1)
	c.Router.RetryLimitExceeded.Add(2)
	c.Router.Timeout.Add(3)
	c.Router.PerTryTimeout.Add(4)
	c.SetGaugeFunc("membership_total", func() int64 { return 9 }) // replaced below
	c.SetGaugeFunc("membership_total", func() int64 { return 3 })
	l := s.Listener("0.0.0.0_15001")
	l.CxTotal.Add(4)
	l.CxActive.Add(1)
	s.Counter("cluster_manager.cds.update_success").Add(5)
	s.Gauge("control_plane.connected_state").Store(1)
	h := s.HTTP("inbound_0.0.0.0_8080")
	h.RqTotal.Add(3)
	h.RqHTTP1Total.Add(2)
	h.RqHTTP2Total.Add(1)
	h.RqActive.Add(1)
	h.RqTooLarge.Add(7)
	h.CxTotal.Add(2)
	h.CxActive.Add(1)
	h.CxDestroy.Add(1)
	h.AddResponse(200)
	h.AddResponse(503)
	h.AddResponse(0) // no response: not completed
	return s
}

func TestWritePrometheus(t *testing.T) {
	var b strings.Builder
	if err := filled().WritePrometheus(&b); err != nil {
		t.Fatal(err)
	}
	const c = `cluster_name="outbound|80||echo.demo.svc.cluster.local"`
	const hl = `envoy_http_conn_manager_prefix="inbound_0.0.0.0_8080"`
	want := `# TYPE envoy_cluster_manager_cds_update_success counter
envoy_cluster_manager_cds_update_success 5
# TYPE envoy_cluster_membership_total gauge
envoy_cluster_membership_total{` + c + `} 3
# TYPE envoy_cluster_upstream_cx_connect_fail counter
envoy_cluster_upstream_cx_connect_fail{` + c + `} 1
# TYPE envoy_cluster_upstream_cx_none_healthy counter
envoy_cluster_upstream_cx_none_healthy{` + c + `} 0
# TYPE envoy_cluster_upstream_cx_total counter
envoy_cluster_upstream_cx_total{` + c + `} 2
# TYPE envoy_cluster_upstream_rq counter
envoy_cluster_upstream_rq{envoy_response_code="200",` + c + `} 2
envoy_cluster_upstream_rq{envoy_response_code="503",` + c + `} 1
# TYPE envoy_cluster_upstream_rq_completed counter
envoy_cluster_upstream_rq_completed{` + c + `} 3
# TYPE envoy_cluster_upstream_rq_per_try_timeout counter
envoy_cluster_upstream_rq_per_try_timeout{` + c + `} 4
# TYPE envoy_cluster_upstream_rq_retry counter
envoy_cluster_upstream_rq_retry{` + c + `} 6
# TYPE envoy_cluster_upstream_rq_retry_limit_exceeded counter
envoy_cluster_upstream_rq_retry_limit_exceeded{` + c + `} 2
# TYPE envoy_cluster_upstream_rq_retry_success counter
envoy_cluster_upstream_rq_retry_success{` + c + `} 1
# TYPE envoy_cluster_upstream_rq_timeout counter
envoy_cluster_upstream_rq_timeout{` + c + `} 3
# TYPE envoy_cluster_upstream_rq_total counter
envoy_cluster_upstream_rq_total{` + c + `} 3
# TYPE envoy_cluster_upstream_rq_xx counter
envoy_cluster_upstream_rq_xx{envoy_response_code_class="2",` + c + `} 2
envoy_cluster_upstream_rq_xx{envoy_response_code_class="5",` + c + `} 1
# TYPE envoy_control_plane_connected_state gauge
envoy_control_plane_connected_state 1
# TYPE envoy_http_downstream_cx_active gauge
envoy_http_downstream_cx_active{` + hl + `} 1
# TYPE envoy_http_downstream_cx_destroy counter
envoy_http_downstream_cx_destroy{` + hl + `} 1
# TYPE envoy_http_downstream_cx_total counter
envoy_http_downstream_cx_total{` + hl + `} 2
# TYPE envoy_http_downstream_rq_active gauge
envoy_http_downstream_rq_active{` + hl + `} 1
# TYPE envoy_http_downstream_rq_completed counter
envoy_http_downstream_rq_completed{` + hl + `} 2
# TYPE envoy_http_downstream_rq_http1_total counter
envoy_http_downstream_rq_http1_total{` + hl + `} 2
# TYPE envoy_http_downstream_rq_http2_total counter
envoy_http_downstream_rq_http2_total{` + hl + `} 1
# TYPE envoy_http_downstream_rq_too_large counter
envoy_http_downstream_rq_too_large{` + hl + `} 7
# TYPE envoy_http_downstream_rq_total counter
envoy_http_downstream_rq_total{` + hl + `} 3
# TYPE envoy_http_downstream_rq_xx counter
envoy_http_downstream_rq_xx{envoy_response_code_class="1",` + hl + `} 0
envoy_http_downstream_rq_xx{envoy_response_code_class="2",` + hl + `} 1
envoy_http_downstream_rq_xx{envoy_response_code_class="3",` + hl + `} 0
envoy_http_downstream_rq_xx{envoy_response_code_class="4",` + hl + `} 0
envoy_http_downstream_rq_xx{envoy_response_code_class="5",` + hl + `} 1
# TYPE envoy_listener_downstream_cx_active gauge
envoy_listener_downstream_cx_active{envoy_listener_address="0.0.0.0_15001"} 1
# TYPE envoy_listener_downstream_cx_total counter
envoy_listener_downstream_cx_total{envoy_listener_address="0.0.0.0_15001"} 4
`
	if got := b.String(); got != want {
		t.Errorf("WritePrometheus =\n%s\nwant\n%s", got, want)
	}
}

func TestWriteText(t *testing.T) {
	var b strings.Builder
	if err := filled().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	const c = "cluster.outbound|80||echo.demo.svc.cluster.local."
	want := strings.Join([]string{
		c + "membership_total: 3",
		c + "upstream_cx_connect_fail: 1",
		c + "upstream_cx_none_healthy: 0",
		c + "upstream_cx_total: 2",
		c + "upstream_rq_200: 2",
		c + "upstream_rq_2xx: 2",
		c + "upstream_rq_503: 1",
		c + "upstream_rq_5xx: 1",
		c + "upstream_rq_completed: 3",
		c + "upstream_rq_per_try_timeout: 4",
		c + "upstream_rq_retry: 6",
		c + "upstream_rq_retry_limit_exceeded: 2",
		c + "upstream_rq_retry_success: 1",
		c + "upstream_rq_timeout: 3",
		c + "upstream_rq_total: 3",
		"cluster_manager.cds.update_success: 5",
		"control_plane.connected_state: 1",
		"http.inbound_0.0.0.0_8080.downstream_cx_active: 1",
		"http.inbound_0.0.0.0_8080.downstream_cx_destroy: 1",
		"http.inbound_0.0.0.0_8080.downstream_cx_total: 2",
		"http.inbound_0.0.0.0_8080.downstream_rq_1xx: 0",
		"http.inbound_0.0.0.0_8080.downstream_rq_2xx: 1",
		"http.inbound_0.0.0.0_8080.downstream_rq_3xx: 0",
		"http.inbound_0.0.0.0_8080.downstream_rq_4xx: 0",
		"http.inbound_0.0.0.0_8080.downstream_rq_5xx: 1",
		"http.inbound_0.0.0.0_8080.downstream_rq_active: 1",
		"http.inbound_0.0.0.0_8080.downstream_rq_completed: 2",
		"http.inbound_0.0.0.0_8080.downstream_rq_http1_total: 2",
		"http.inbound_0.0.0.0_8080.downstream_rq_http2_total: 1",
		"http.inbound_0.0.0.0_8080.downstream_rq_too_large: 7",
		"http.inbound_0.0.0.0_8080.downstream_rq_total: 3",
		"listener.0.0.0.0_15001.downstream_cx_active: 1",
		"listener.0.0.0.0_15001.downstream_cx_total: 4",
	}, "\n") + "\n"
	if got := b.String(); got != want {
		t.Errorf("WriteText =\n%s\nwant\n%s", got, want)
	}
}

// Looking a metric up again returns the same one: hot paths keep the
// pointer and a config update does not reset the counters. Run with -race.
func TestLookupsShareMetrics(t *testing.T) {
	s := New()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				s.Cluster("c").RqTotal.Add(1)
				s.Listener("l").CxTotal.Add(1)
				s.Counter("x").Add(1)
				s.Gauge("g").Add(1)
				_ = s.WriteText(&strings.Builder{})
			}
		})
	}
	wg.Wait()
	c1, l1, x1, g1 := s.Cluster("c"), s.Listener("l"), s.Counter("x"), s.Gauge("g")
	if c1 != s.Cluster("c") || l1 != s.Listener("l") || x1 != s.Counter("x") || g1 != s.Gauge("g") {
		t.Fatal("a second lookup returned another metric")
	}
	for name, got := range map[string]uint64{
		"cluster": s.Cluster("c").RqTotal.Load(), "listener": s.Listener("l").CxTotal.Load(),
		"counter": s.Counter("x").Load(), "gauge": uint64(s.Gauge("g").Load()),
	} {
		if got != 800 {
			t.Errorf("%s = %d after 800 increments", name, got)
		}
	}
}

// A cluster's named counters and gauges render as Envoy's: dotted under
// cluster.NAME. in /stats, envoy_cluster_* with the cluster_name label in
// Prometheus.
func TestClusterNamedMetrics(t *testing.T) {
	s := New()
	c := s.Cluster("outbound|80||echo")
	c.Counter("upstream_rq_pending_overflow").Add(2)
	c.Gauge("circuit_breakers.default.cx_open").Store(1)
	if first := c.Counter("upstream_rq_pending_overflow"); first != c.Counter("upstream_rq_pending_overflow") {
		t.Fatal("a second lookup returned another counter")
	}
	var text, prom strings.Builder
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := s.WritePrometheus(&prom); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"cluster.outbound|80||echo.upstream_rq_pending_overflow: 2\n",
		"cluster.outbound|80||echo.circuit_breakers.default.cx_open: 1\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("/stats lacks %q:\n%s", want, text.String())
		}
	}
	for _, want := range []string{
		"# TYPE envoy_cluster_upstream_rq_pending_overflow counter\nenvoy_cluster_upstream_rq_pending_overflow{cluster_name=\"outbound|80||echo\"} 2\n",
		"# TYPE envoy_cluster_circuit_breakers_default_cx_open gauge\nenvoy_cluster_circuit_breakers_default_cx_open{cluster_name=\"outbound|80||echo\"} 1\n",
	} {
		if !strings.Contains(prom.String(), want) {
			t.Errorf("Prometheus text lacks %q:\n%s", want, prom.String())
		}
	}
}

// An idle cluster holds no per-code counters (a sidecar with 1,000
// clusters would hold 4.7 MiB of them); the first responses, from many
// goroutines at once, allocate them once and are all counted.
func TestClusterCodeCountersAllocatedOnFirstResponse(t *testing.T) {
	c := New().Cluster("outbound|80||a")
	if c.codes.Load() != nil {
		t.Fatal("a cluster without responses holds per-code counters")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				c.AddResponse(200)
			}
		})
	}
	wg.Wait()
	completed, classes := c.responses()
	if completed != 800 || classes[2] != 800 || c.codes.Load()[200].Load() != 800 {
		t.Errorf("completed %d, 2xx %d, want 800 each", completed, classes[2])
	}
}
