package proxy

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/filters/http/registry"
	"github.com/straitmesh/strait/internal/proxy/listener"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
	"github.com/straitmesh/strait/internal/proxy/tracing"
)

// TestGoldenXDSPassesFieldAudits pushes every resource of every golden
// file of straitd's generator (internal/xds/gen/testdata/*/golden) through
// strait-proxy's builders, whose field audits refuse what strait-proxy
// does not implement: whatever straitd emits, strait-proxy must accept.
func TestGoldenXDSPassesFieldAudits(t *testing.T) {
	files, err := filepath.Glob("../xds/gen/testdata/*/golden/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("found %d golden files; want straitd's generator testdata", len(files))
	}
	secrets := tlsconf.NewProvider(tlsconf.ProviderOptions{})
	t.Cleanup(secrets.Close)
	logs := accesslog.NewFiles(accesslog.FilesOptions{})
	t.Cleanup(func() { logs.Close() })
	tracers := tracing.NewReporters(tracing.ReportersOptions{})
	t.Cleanup(tracers.Close)
	counts := map[string]int{}
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "proxyless.") {
			continue // for proxyless gRPC clients (API listeners), not strait-proxy
		}
		kind := filepath.Ext(strings.TrimSuffix(f, ".json"))
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var docs []json.RawMessage
		if err := json.Unmarshal(raw, &docs); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		decode := func(d json.RawMessage, m proto.Message) {
			t.Helper()
			if err := protojson.Unmarshal(d, m); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
		switch kind {
		case ".listeners":
			for _, d := range docs {
				var l listenerv3.Listener
				decode(d, &l)
				if _, err := listener.Build(&l, listener.Deps{Stats: stats.New(), Secrets: secrets, AccessLogs: logs, Tracing: tracers}); err != nil {
					t.Errorf("%s: listener %q: %v", f, l.GetName(), err)
				}
			}
		case ".routes":
			for _, d := range docs {
				var rc routev3.RouteConfiguration
				decode(d, &rc)
				if _, err := route.CompileWith(&rc, registry.Default()); err != nil {
					t.Errorf("%s: %v", f, err)
				}
			}
		case ".clusters":
			var cs []*clusterv3.Cluster
			for _, d := range docs {
				c := &clusterv3.Cluster{}
				decode(d, c)
				cs = append(cs, c)
			}
			cm := cluster.NewManager(slog.New(slog.DiscardHandler), stats.New())
			cm.SetSecrets(secrets)
			// A file the pod would mount (a CRL) is not on this machine:
			// the field audits passed when that is all that fails.
			if _, err := cm.ApplyCDS("1", cs); err != nil && !strings.Contains(err.Error(), "no such file or directory") {
				t.Errorf("%s: %v", f, err)
			}
			cm.Close()
		case ".endpoints":
			var clas []*endpointv3.ClusterLoadAssignment
			for _, d := range docs {
				c := &endpointv3.ClusterLoadAssignment{}
				decode(d, c)
				clas = append(clas, c)
			}
			cm := cluster.NewManager(slog.New(slog.DiscardHandler), stats.New())
			if err := cm.ApplyEDS("1", clas); err != nil {
				t.Errorf("%s: %v", f, err)
			}
			cm.Close()
		default:
			continue
		}
		counts[kind] += len(docs)
	}
	t.Logf("resources built: %v", counts)
	for _, k := range []string{".listeners", ".routes", ".clusters", ".endpoints"} {
		if counts[k] == 0 {
			t.Errorf("no %s resources found", k)
		}
	}
}
