package admin

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

type fakeSource struct {
	ready, initializing atomic.Bool
	dumpErr             error

	mu       sync.Mutex
	drains   []string // "inbound=B graceful=B" per DrainListeners call
	dumps    []DumpRequest
	draining bool
	quits    int
}

func (f *fakeSource) Ready() bool { return f.ready.Load() }

func (f *fakeSource) Initializing() bool { return f.initializing.Load() }

func (f *fakeSource) Draining() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.draining
}

func (f *fakeSource) DrainListeners(r DrainRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.draining = true
	f.drains = append(f.drains, fmt.Sprintf("inbound=%t graceful=%t skip_exit=%t", r.InboundOnly, r.Graceful, r.SkipExit))
}

func (f *fakeSource) Quit() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.quits++
}

func (f *fakeSource) calls() ([]string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.drains...), f.quits
}

func (f *fakeSource) ConfigDump(r DumpRequest) (*adminv3.ConfigDump, error) {
	f.mu.Lock()
	f.dumps = append(f.dumps, r)
	f.mu.Unlock()
	if f.dumpErr != nil {
		return nil, f.dumpErr
	}
	cd, err := anypb.New(&adminv3.ClustersConfigDump{
		VersionInfo: "7",
		DynamicActiveClusters: []*adminv3.ClustersConfigDump_DynamicCluster{{
			VersionInfo: "7",
			Cluster:     mustAny(&clusterv3.Cluster{Name: "outbound|80||echo"}),
		}},
	})
	if err != nil {
		return nil, err
	}
	return &adminv3.ConfigDump{Configs: []*anypb.Any{cd}}, nil
}

func mustAny(m *clusterv3.Cluster) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}

func start(t *testing.T, src Source, st *stats.Store) string {
	t.Helper()
	s, err := Start(Options{Address: "127.0.0.1:0", Source: src, Stats: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return "http://" + s.Addr().String()
}

func get(t *testing.T, method, url string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func TestReady(t *testing.T) {
	src := &fakeSource{}
	base := start(t, src, stats.New())
	if code, _, body := get(t, "GET", base+"/ready"); code != http.StatusServiceUnavailable || body != "PRE_INITIALIZING\n" {
		t.Errorf("/ready before config = %d %q, want 503 PRE_INITIALIZING", code, body)
	}
	src.initializing.Store(true)
	if code, _, body := get(t, "GET", base+"/ready"); code != http.StatusServiceUnavailable || body != "INITIALIZING\n" {
		t.Errorf("/ready once the clusters are initialized = %d %q, want 503 INITIALIZING", code, body)
	}
	src.ready.Store(true)
	if code, _, body := get(t, "GET", base+"/ready"); code != http.StatusOK || body != "LIVE\n" {
		t.Errorf("/ready after config = %d %q, want 200 LIVE", code, body)
	}
	if code, _, _ := get(t, "POST", base+"/ready"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /ready = %d, want 405", code)
	}
}

func TestConfigDump(t *testing.T) {
	src := &fakeSource{}
	base := start(t, src, stats.New())
	for _, q := range []string{"?resource=dynamic_active_clusters", "?mask=static_clusters", "?name_regex=a"} {
		if code, _, body := get(t, "GET", base+"/config_dump"+q); code != http.StatusBadRequest || !strings.Contains(body, q[1:strings.Index(q, "=")]) {
			t.Errorf("/config_dump%s = %d %q, want 400 naming the parameter", q, code, body)
		}
	}
	// include_eds asks the source for the endpoints, whatever its value;
	// without it the source is not asked for them.
	for _, q := range []string{"?include_eds", "?include_eds=true", ""} {
		if code, _, _ := get(t, "GET", base+"/config_dump"+q); code != http.StatusOK {
			t.Errorf("/config_dump%s = %d, want 200", q, code)
		}
	}
	src.mu.Lock()
	if want := []DumpRequest{{IncludeEDS: true}, {IncludeEDS: true}, {}}; !slices.Equal(src.dumps, want) {
		t.Errorf("the source was asked for %+v, want %+v", src.dumps, want)
	}
	src.mu.Unlock()
	code, ctype, body := get(t, "GET", base+"/config_dump")
	if code != http.StatusOK || ctype != "application/json" {
		t.Fatalf("/config_dump = %d %s: %s", code, ctype, body)
	}
	var cd adminv3.ConfigDump
	if err := protojson.Unmarshal([]byte(body), &cd); err != nil {
		t.Fatalf("/config_dump is not a ConfigDump: %v\n%s", err, body)
	}
	var clusters adminv3.ClustersConfigDump
	if len(cd.Configs) != 1 || cd.Configs[0].UnmarshalTo(&clusters) != nil || clusters.VersionInfo != "7" ||
		!strings.Contains(body, "outbound|80||echo") {
		t.Errorf("/config_dump = %s, want the source's clusters at version 7", body)
	}

	src.dumpErr = errors.New("no config yet")
	if code, _, body := get(t, "GET", base+"/config_dump"); code != http.StatusInternalServerError || !strings.Contains(body, "no config yet") {
		t.Errorf("/config_dump with a failing source = %d %q, want 500 with the error", code, body)
	}
}

func TestStats(t *testing.T) {
	st := stats.New()
	st.Counter("cluster_manager.cds.update_success").Add(2)
	base := start(t, &fakeSource{}, st)
	if code, _, body := get(t, "GET", base+"/stats"); code != http.StatusOK || body != "cluster_manager.cds.update_success: 2\n" {
		t.Errorf("/stats = %d %q", code, body)
	}
	const prom = "# TYPE envoy_cluster_manager_cds_update_success counter\nenvoy_cluster_manager_cds_update_success 2\n"
	for _, path := range []string{"/stats/prometheus", "/stats?format=prometheus"} {
		if code, _, body := get(t, "GET", base+path); code != http.StatusOK || body != prom {
			t.Errorf("%s = %d %q, want %q", path, code, body, prom)
		}
	}
}

// Close stops serving: the address refuses connections afterwards.
func TestClose(t *testing.T) {
	s, err := Start(Options{Address: "127.0.0.1:0", Source: &fakeSource{}, Stats: stats.New(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + s.Addr().String() + "/ready"
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(url); err == nil {
		t.Error("the admin server still answers after Close")
	}
}

func TestStartBadAddress(t *testing.T) {
	if _, err := Start(Options{Address: "127.0.0.1:not-a-port", Source: &fakeSource{}, Stats: stats.New(), Logger: slog.New(slog.DiscardHandler)}); err == nil {
		t.Fatal("Start with a bad address succeeded")
	}
}

// POST /drain_listeners passes its query flags on, and /ready then answers
// 503 DRAINING, as Envoy's does; GET is refused with 405.
func TestDrainListeners(t *testing.T) {
	src := &fakeSource{}
	src.ready.Store(true)
	base := start(t, src, stats.New())
	if code, _, _ := get(t, "GET", base+"/drain_listeners"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /drain_listeners = %d, want 405", code)
	}
	if drains, _ := src.calls(); len(drains) != 0 {
		t.Fatalf("GET drained: %v", drains)
	}
	// Refused, draining nothing: skip_exit without graceful (as Envoy),
	// and a parameter we do not know.
	for q, msg := range map[string]string{"?skip_exit": "skip_exit requires graceful", "?graceful&timeout=5": `"timeout" is not supported`} {
		if code, _, body := get(t, "POST", base+"/drain_listeners"+q); code != http.StatusBadRequest || !strings.Contains(body, msg) {
			t.Errorf("POST /drain_listeners%s = %d %q, want 400 %q", q, code, body, msg)
		}
	}
	for _, q := range []string{"", "?inboundonly", "?graceful", "?inboundonly&graceful", "?graceful&skip_exit"} {
		if code, _, body := get(t, "POST", base+"/drain_listeners"+q); code != http.StatusOK || body != "OK\n" {
			t.Errorf("POST /drain_listeners%s = %d %q, want 200 OK", q, code, body)
		}
	}
	want := []string{"inbound=false graceful=false skip_exit=false", "inbound=true graceful=false skip_exit=false",
		"inbound=false graceful=true skip_exit=false", "inbound=true graceful=true skip_exit=false", "inbound=false graceful=true skip_exit=true"}
	if drains, _ := src.calls(); !slices.Equal(drains, want) {
		t.Errorf("drains = %q, want %q", drains, want)
	}
	if code, _, body := get(t, "GET", base+"/ready"); code != http.StatusServiceUnavailable || body != "DRAINING\n" {
		t.Errorf("/ready while draining = %d %q, want 503 DRAINING", code, body)
	}
}

func TestQuitQuitQuit(t *testing.T) {
	src := &fakeSource{}
	base := start(t, src, stats.New())
	if code, _, _ := get(t, "GET", base+"/quitquitquit"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /quitquitquit = %d, want 405", code)
	}
	if _, quits := src.calls(); quits != 0 {
		t.Fatal("GET /quitquitquit quit")
	}
	if code, _, body := get(t, "POST", base+"/quitquitquit"); code != http.StatusOK || body != "OK\n" {
		t.Errorf("POST /quitquitquit = %d %q, want 200 OK", code, body)
	}
	if _, quits := src.calls(); quits != 1 {
		t.Errorf("quits = %d, want 1", quits)
	}
}

// The mutating endpoints refuse a peer that is not on loopback.
func TestMutationsLoopbackOnly(t *testing.T) {
	src := &fakeSource{}
	s, err := Start(Options{Address: "127.0.0.1:0", Source: src, Stats: stats.New(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, path := range []string{"/drain_listeners", "/quitquitquit"} {
		for _, peer := range []string{"10.1.2.3:40000", "[2001:db8::1]:40000"} {
			req := httptest.NewRequest("POST", path, nil)
			req.RemoteAddr = peer
			rec := httptest.NewRecorder()
			s.srv.Handler.ServeHTTP(rec, req)
			if rec.Code != http.StatusForbidden {
				t.Errorf("POST %s from %s = %d, want 403", path, peer, rec.Code)
			}
		}
	}
	if drains, quits := src.calls(); len(drains) != 0 || quits != 0 {
		t.Errorf("a remote peer drained %v / quit %d times", drains, quits)
	}
}
