package hcm

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/admin"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// adminStats reads the admin server's /stats (Envoy's plain form) into a
// map of name to value.
func adminStats(t *testing.T, st *stats.Store) map[string]int64 {
	t.Helper()
	a, err := admin.Start(admin.Options{Address: "127.0.0.1:0", Stats: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	resp, err := http.Get("http://" + a.Addr().String() + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), ": ")
		if !ok {
			t.Fatalf("/stats line %q is not name: value", sc.Text())
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("/stats line %q: %v", sc.Text(), err)
		}
		out[name] = n
	}
	return out
}

// waitStat waits until the gauge or counter g reaches want.
func waitStat(t *testing.T, what string, get func() int64, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for get() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %d, want %d", what, get(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestEnvoyStats drives real requests through the HCM and a cluster and
// checks the exact values of the Envoy stats Istio's tasks read
// (circuit breaking, retries, timeouts, outlier detection) in the admin
// server's /stats.
func TestEnvoyStats(t *testing.T) {
	const cp = "cluster.be."
	const hp = "http.test."
	get := func(t *testing.T, c *http.Client, addr, path string, hdr ...string) int {
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		req.Header.Set("X-Key", t.Name())
		resp, err := c.Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name string
		// closed: the cluster's endpoint refuses connections.
		closed bool
		// h2: the cluster speaks HTTP/2 to the backend.
		h2   bool
		edit func(*clusterv3.Cluster)
		// run sends the requests; it returns the statuses seen.
		run  func(t *testing.T, c *http.Client, addr string, st *stats.Store) []int
		want map[string]int64
	}{{
		// Istio's circuit-breaking task: maxConnections 1 and
		// http1MaxPendingRequests 1; one request holds the connection,
		// a second waits for it, a third overflows (503 UO).
		name: "pending overflow",
		edit: func(c *clusterv3.Cluster) {
			c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
				MaxConnections: wrapperspb.UInt32(1), MaxPendingRequests: wrapperspb.UInt32(1)}}}
		},
		run: func(t *testing.T, c *http.Client, addr string, st *stats.Store) []int {
			cs := st.Cluster("be")
			codes := make([]int, 3)
			var wg sync.WaitGroup
			wg.Go(func() { codes[0] = get(t, c, addr, "/slow", "X-Delay", "300ms") })
			waitStat(t, "upstream_rq_active", cs.Gauge("upstream_rq_active").Load, 1)
			waitStat(t, "upstream_cx_active", cs.Gauge("upstream_cx_active").Load, 1)
			wg.Go(func() { codes[1] = get(t, c, addr, "/slow") })
			waitStat(t, "upstream_rq_pending_active", cs.Gauge("upstream_rq_pending_active").Load, 1)
			codes[2] = get(t, c, addr, "/slow")
			wg.Wait()
			return codes
		},
		want: map[string]int64{
			cp + "upstream_rq_pending_total":         2, // the first waited for its dial, the second for the connection
			cp + "upstream_rq_pending_active":        0,
			cp + "upstream_rq_pending_overflow":      1,
			cp + "upstream_rq_pending_failure_eject": 0,
			cp + "upstream_cx_overflow":              2,
			cp + "upstream_cx_total":                 1,
			cp + "upstream_cx_active":                1, // idle in the pool
			cp + "upstream_cx_destroy":               0,
			cp + "upstream_rq_active":                0,
			// The overflowed request is not in upstream_rq_total (Envoy
			// counts a request once it has a connection) but counts, as in
			// Envoy's router (chargeUpstreamAbort), as an upstream 503.
			cp + "upstream_rq_total":                2,
			cp + "upstream_rq_200":                  2,
			cp + "upstream_rq_2xx":                  2,
			cp + "upstream_rq_503":                  1,
			cp + "upstream_rq_5xx":                  1,
			cp + "upstream_rq_completed":            3,
			cp + "circuit_breakers.default.cx_open": 1,
			cp + "membership_total":                 1,
			cp + "membership_healthy":               1,
			hp + "downstream_rq_total":              3,
			hp + "downstream_rq_http1_total":        3,
			hp + "downstream_rq_active":             0,
			hp + "downstream_rq_2xx":                2,
			hp + "downstream_rq_5xx":                1,
			hp + "downstream_rq_completed":          3,
		},
	}, {
		// A connect failure fails the request waiting for that
		// connection (503 UF).
		name:   "connect failure",
		closed: true,
		run: func(t *testing.T, c *http.Client, addr string, _ *stats.Store) []int {
			return []int{get(t, c, addr, "/")}
		},
		want: map[string]int64{
			cp + "upstream_cx_connect_fail":          1,
			cp + "upstream_rq_total":                 0, // it never had a connection
			cp + "upstream_cx_connect_timeout":       0,
			cp + "upstream_rq_pending_total":         1,
			cp + "upstream_rq_pending_failure_eject": 1,
			cp + "upstream_rq_pending_active":        0,
			cp + "upstream_cx_total":                 1,
			cp + "upstream_cx_destroy":               1,
			cp + "upstream_cx_active":                0,
			cp + "upstream_rq_active":                0,
			hp + "downstream_rq_5xx":                 1,
		},
	}, {
		// The HTTP/2 pool: the first streams wait for the dial, the
		// next find the connection.
		name: "http2 upstream",
		h2:   true,
		run: func(t *testing.T, c *http.Client, addr string, _ *stats.Store) []int {
			return []int{get(t, c, addr, "/"), get(t, c, addr, "/")}
		},
		want: map[string]int64{
			cp + "upstream_rq_pending_total":  1,
			cp + "upstream_rq_pending_active": 0,
			cp + "upstream_cx_total":          1,
			cp + "upstream_cx_active":         1,
			cp + "upstream_rq_200":            2,
			cp + "upstream_rq_completed":      2,
			hp + "downstream_rq_2xx":          2,
		},
	}, {
		name: "retry",
		run: func(t *testing.T, c *http.Client, addr string, _ *stats.Store) []int {
			return []int{get(t, c, addr, "/retry", "X-Fail", "1")}
		},
		want: map[string]int64{
			cp + "upstream_rq_retry":                1,
			cp + "upstream_rq_retry_success":        1,
			cp + "upstream_rq_retry_overflow":       0,
			cp + "upstream_rq_retry_limit_exceeded": 0,
			cp + "upstream_rq_total":                2,
			cp + "upstream_rq_503":                  1,
			cp + "upstream_rq_5xx":                  1,
			cp + "upstream_rq_200":                  1,
			cp + "upstream_rq_2xx":                  1,
			cp + "upstream_rq_completed":            2,
			// The 503's connection is not reused for the retry: both
			// attempts waited for a dial.
			cp + "upstream_rq_pending_total": 2,
			cp + "upstream_cx_total":         2,
			cp + "upstream_cx_destroy":       1,
			cp + "upstream_cx_active":        1,
			hp + "downstream_rq_total":       1,
			hp + "downstream_rq_2xx":         1,
			hp + "downstream_rq_5xx":         0,
			hp + "downstream_rq_completed":   1,
		},
	}, {
		// Both attempts outlast the per-try timeout: 504 UT after one retry.
		name: "per-try timeout",
		run: func(t *testing.T, c *http.Client, addr string, _ *stats.Store) []int {
			return []int{get(t, c, addr, "/pertry", "X-Delay", "2s")}
		},
		want: map[string]int64{
			cp + "upstream_rq_per_try_timeout": 2,
			cp + "upstream_rq_retry":           1,
			cp + "upstream_rq_timeout":         0,
			cp + "upstream_rq_total":           2,
			cp + "upstream_rq_active":          0,
			hp + "downstream_rq_total":         1,
			hp + "downstream_rq_5xx":           1,
			hp + "downstream_rq_completed":     1,
		},
	}, {
		name: "route timeout",
		run: func(t *testing.T, c *http.Client, addr string, _ *stats.Store) []int {
			return []int{get(t, c, addr, "/timeout", "X-Delay", "2s")}
		},
		want: map[string]int64{
			cp + "upstream_rq_timeout":         1,
			cp + "upstream_rq_per_try_timeout": 0,
			cp + "upstream_rq_total":           1,
			hp + "downstream_rq_5xx":           1,
		},
	}, {
		// Istio's outlier detection: consecutive5xxErrors 2 ejects the
		// only host after its second 503.
		name: "ejection",
		edit: func(c *clusterv3.Cluster) {
			c.OutlierDetection = &clusterv3.OutlierDetection{
				Consecutive_5Xx:                    wrapperspb.UInt32(2),
				BaseEjectionTime:                   durationpb.New(time.Minute),
				MaxEjectionPercent:                 wrapperspb.UInt32(100),
				EnforcingConsecutiveGatewayFailure: wrapperspb.UInt32(0),
				EnforcingSuccessRate:               wrapperspb.UInt32(0),
			}
		},
		run: func(t *testing.T, c *http.Client, addr string, _ *stats.Store) []int {
			return []int{get(t, c, addr, "/", "X-Fail", "2"), get(t, c, addr, "/", "X-Fail", "2")}
		},
		want: map[string]int64{
			cp + "outlier_detection.ejections_active":                               1,
			cp + "outlier_detection.ejections_enforced_total":                       1,
			cp + "outlier_detection.ejections_enforced_consecutive_5xx":             1,
			cp + "outlier_detection.ejections_detected_consecutive_5xx":             1,
			cp + "outlier_detection.ejections_detected_consecutive_gateway_failure": 0,
			cp + "membership_total":                                                 1,
			cp + "membership_healthy":                                               0,
			cp + "upstream_rq_503":                                                  2,
			cp + "upstream_rq_5xx":                                                  2,
			hp + "downstream_rq_5xx":                                                2,
			hp + "downstream_cx_total":                                              1,
			hp + "downstream_cx_active":                                             0, // the client closed it
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			be := routerBackend(t, tc.h2)
			cl := staticCluster("be", be.Listener.Addr().String())
			if tc.h2 {
				cl = h2Cluster(t, "be", be.Listener.Addr().String())
			}
			if tc.closed {
				be.Close() // nothing listens on its port any more
			}
			if tc.edit != nil {
				tc.edit(cl)
			}
			addr, st := startH2ProxyStats(t, CodecStrait, routerRoutes("be"), nil, cl)
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			c := &http.Client{Timeout: 10 * time.Second, Transport: tr}
			codes := tc.run(t, c, addr, st)
			if tc.name == "ejection" {
				tr.CloseIdleConnections()
				waitStat(t, "downstream_cx_active", st.HTTP("test").CxActive.Load, 0)
			}
			// The downstream counters end after the response is written.
			waitStat(t, "downstream_rq_active", st.HTTP("test").RqActive.Load, 0)
			got := adminStats(t, st)
			for name, want := range tc.want {
				if v, ok := got[name]; !ok {
					t.Errorf("/stats has no %s", name)
				} else if v != want {
					t.Errorf("%s = %d, want %d", name, v, want)
				}
			}
			if t.Failed() {
				t.Logf("statuses %v", codes)
			}
		})
	}
}

// TestDownstreamStatsEveryPath: the HCM's downstream counters on both
// codecs, for HTTP/1.1 and HTTP/2 (h2c) clients, logged or not (the
// HTTP/2 path reads the status from the access log's record when there
// is one).
func TestDownstreamStatsEveryPath(t *testing.T) {
	const hp = "http.test."
	for _, codec := range codecs {
		for _, logged := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/logged=%v", codec, logged), func(t *testing.T) {
				be := routerBackend(t, false)
				addr, st := startStatsProxy(t, codec, logged, staticCluster("be", be.Listener.Addr().String()))
				h1 := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
				h2 := h2cClient()
				for _, c := range []*http.Client{h1, h2, h2} {
					req, _ := http.NewRequest("GET", "http://"+addr+"/x", nil)
					req.Header.Set("X-Fail", "1") // the first answer is a 503
					req.Header.Set("X-Key", t.Name())
					resp, err := c.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
					resp.Body.Close()
				}
				h1.CloseIdleConnections()
				h2.CloseIdleConnections()
				waitStat(t, "downstream_cx_active", st.HTTP("test").CxActive.Load, 0)
				got := adminStats(t, st)
				for name, want := range map[string]int64{
					hp + "downstream_rq_total":       3,
					hp + "downstream_rq_http1_total": 1,
					hp + "downstream_rq_http2_total": 2,
					hp + "downstream_rq_active":      0,
					hp + "downstream_rq_2xx":         2,
					hp + "downstream_rq_5xx":         1,
					hp + "downstream_rq_completed":   3,
					hp + "downstream_cx_total":       2,
					hp + "downstream_cx_active":      0,
				} {
					if got[name] != want {
						t.Errorf("%s = %d, want %d", name, got[name], want)
					}
				}
			})
		}
	}
}

// startStatsProxy is startH2ProxyStats with routerRoutes, and an access
// log (to a file in the test's directory) when logged.
func startStatsProxy(t *testing.T, codec Codec, logged bool, cl *clusterv3.Cluster) (string, *stats.Store) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	st := stats.New()
	cm := cluster.NewManager(log, st)
	if err := cm.AddStatic([]*clusterv3.Cluster{cl}); err != nil {
		t.Fatal(err)
	}
	router, _ := anypb.New(&routerv3.Router{})
	f, err := Build(&hcmv3.HttpConnectionManager{
		StatPrefix: "test",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: routerRoutes(cl.GetName())}}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: routerFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if logged {
		files := accesslog.NewFiles(accesslog.FilesOptions{FlushInterval: time.Hour})
		t.Cleanup(func() { files.Close() })
		fl, err := anypb.New(&filev3.FileAccessLog{Path: filepath.Join(t.TempDir(), "access.log")})
		if err != nil {
			t.Fatal(err)
		}
		if f.AccessLog, err = accesslog.Build([]*accesslogv3.AccessLog{{Name: accesslog.FileLoggerName, ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: fl}}}, files); err != nil {
			t.Fatal(err)
		}
	}
	f.UseStats(st)
	s := NewServer(Options{Logger: log, Clusters: cm, Codec: codec})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.ServeConn(c, f, netip.AddrPort{}, cluster.OriginalSource{})
		}
	}()
	t.Cleanup(func() { ln.Close(); s.Close() })
	return ln.Addr().String(), st
}

// TestUpstreamRqTotalLeavesOutOverflow: a request the circuit breaker
// refuses (upstream_rq_pending_overflow) is not in upstream_rq_total,
// which, as in Envoy's connection pool (attachStreamToClient), counts the
// requests that got a connection; on both codecs.
func TestUpstreamRqTotalLeavesOutOverflow(t *testing.T) {
	for _, codec := range codecs {
		t.Run(string(codec), func(t *testing.T) {
			be := routerBackend(t, false)
			cl := staticCluster("be", be.Listener.Addr().String())
			cl.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
				MaxConnections: wrapperspb.UInt32(1), MaxPendingRequests: wrapperspb.UInt32(0)}}}
			addr, st := startH2ProxyStats(t, codec, routerRoutes("be"), nil, cl)
			cs := st.Cluster("be")
			c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
			get := func(delay string) int {
				req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
				req.Header.Set("X-Delay", delay)
				resp, err := c.Do(req)
				if err != nil {
					t.Error(err)
					return 0
				}
				_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
				resp.Body.Close()
				return resp.StatusCode
			}
			var slow int
			var wg sync.WaitGroup
			wg.Go(func() { slow = get("500ms") })
			waitStat(t, "upstream_rq_active", cs.Gauge("upstream_rq_active").Load, 1)
			waitStat(t, "upstream_cx_active", cs.Gauge("upstream_cx_active").Load, 1)
			refused := get("0s") // no connection free, none may wait
			wg.Wait()
			again := get("0s") // the freed connection takes it
			if slow != 200 || refused != 503 || again != 200 {
				t.Fatalf("statuses %d %d %d, want 200 503 200", slow, refused, again)
			}
			if got := cs.Counter("upstream_rq_pending_overflow").Load(); got != 1 {
				t.Errorf("upstream_rq_pending_overflow = %d, want 1", got)
			}
			if got := cs.RqTotal.Load(); got != 2 {
				t.Errorf("upstream_rq_total = %d, want 2 (the refused request left out)", got)
			}
		})
	}
}
