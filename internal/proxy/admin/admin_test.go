package admin

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

type fakeSource struct {
	ready   atomic.Bool
	dumpErr error
}

func (f *fakeSource) Ready() bool { return f.ready.Load() }

func (f *fakeSource) ConfigDump() (*adminv3.ConfigDump, error) {
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
