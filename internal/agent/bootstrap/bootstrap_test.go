package bootstrap

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func testOptions() Options {
	return Options{
		NodeID:  "sidecar~10.1.0.2~client-7d9f.demo~demo.svc.cluster.local",
		Cluster: "client.demo",
		Metadata: map[string]string{
			"NAMESPACE":         "demo",
			"INSTANCE_IPS":      "10.1.0.2",
			"POD_NAME":          "client-7d9f",
			"SERVICE_ACCOUNT":   "client",
			"INTERCEPTION_MODE": "REDIRECT",
			"NAME":              "client-7d9f",
			"WORKLOAD_NAME":     "client",
			"CLUSTER_ID":        "Kubernetes",
			"MESH_ID":           "cluster.local",
			"OWNER":             "kubernetes://apis/apps/v1/namespaces/demo/deployments/client",
		},
		Labels:        map[string]string{"app": "client", "version": "v1", "pod-template-hash": "7d9f"},
		AdminPort:     15000,
		XDSSocketPath: "/var/run/strait/etc/istio/proxy/XDS",
		SDSSocketPath: "/var/run/strait/var/run/secrets/workload-spiffe-uds/socket",
	}
}

func TestBuildGolden(t *testing.T) {
	b, err := Build(testOptions())
	if err != nil {
		t.Fatal(err)
	}
	got, err := Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "sidecar.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/agent/bootstrap -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("bootstrap differs from %s (run with -update and review the diff):\n%s", golden, got)
	}

	// The golden file round-trips and still validates, nested Anys included.
	parsed, err := Parse(want)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(parsed, b) {
		t.Error("Parse(Marshal(b)) != b")
	}
	if err := parsed.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	hcm := &hcmv3.HttpConnectionManager{}
	if err := parsed.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	if err := hcm.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	po := &httpv3.HttpProtocolOptions{}
	if err := parsed.GetStaticResources().GetClusters()[0].GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey].UnmarshalTo(po); err != nil {
		t.Fatal(err)
	}
	if po.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
		t.Error("xds-grpc must use explicit http2")
	}
}

func TestMarshalIsStable(t *testing.T) {
	b, err := Build(testOptions())
	if err != nil {
		t.Fatal(err)
	}
	first, _ := Marshal(b)
	for range 20 {
		again, _ := Marshal(b)
		if !bytes.Equal(first, again) {
			t.Fatal("Marshal output is not stable")
		}
	}
}

func TestWrite(t *testing.T) {
	b, err := Build(testOptions())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "etc", "istio", "proxy", "envoy-rev.json")
	if err := Write(path, b); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if parsed.GetNode().GetId() != testOptions().NodeID {
		t.Errorf("node id = %q", parsed.GetNode().GetId())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temp files left behind: %v", entries)
	}
}

func TestBuildRejectsInvalid(t *testing.T) {
	o := testOptions()
	o.NodeID = ""
	o.XDSSocketPath = ""
	if _, err := Build(o); err == nil {
		t.Fatal("want a validation error for an empty pipe path")
	}
}

func TestNodeLocality(t *testing.T) {
	o := testOptions()
	o.Locality = "us-east/us-east-1a/rack4"
	b, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	l := b.GetNode().GetLocality()
	if l.GetRegion() != "us-east" || l.GetZone() != "us-east-1a" || l.GetSubZone() != "rack4" {
		t.Errorf("node.locality = %v", l)
	}
	if b, _ := Build(testOptions()); b.GetNode().GetLocality() != nil {
		t.Errorf("no locality: node.locality = %v, want unset", b.GetNode().GetLocality())
	}
}
