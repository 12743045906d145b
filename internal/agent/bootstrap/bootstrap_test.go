package bootstrap

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// parse reads a bootstrap as the proxy does (protojson into Envoy's type).
func parse(t *testing.T, data []byte) *bootstrapv3.Bootstrap {
	t.Helper()
	b := &bootstrapv3.Bootstrap{}
	if err := protojson.Unmarshal(data, b); err != nil {
		t.Fatalf("protojson: %v\n%s", err, data)
	}
	return b
}

// built is Build then Marshal then parse.
func built(t *testing.T, o Options) *bootstrapv3.Bootstrap {
	t.Helper()
	b, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	data, err := Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, data)
}

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

	// The golden file parses as Envoy's type, equals the bootstrap built
	// from go-control-plane's types, and validates, nested Anys included.
	parsed := parse(t, want)
	ref, err := refBuild(testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(parsed, ref) {
		t.Errorf("the bootstrap differs from the one built from Envoy's types:\n got %v\nwant %v", parsed, ref)
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
	parsed := parse(t, data)
	if parsed.GetNode().GetId() != testOptions().NodeID {
		t.Errorf("node id = %q", parsed.GetNode().GetId())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temp files left behind: %v", entries)
	}
}

// What Envoy's validation rules or protojson refuse, Build refuses; the
// reference built from Envoy's types refuses it too.
func TestBuildRejectsInvalid(t *testing.T) {
	for name, change := range map[string]func(*Options){
		"empty pipe path":    func(o *Options) { o.NodeID = ""; o.XDSSocketPath = "" },
		"admin port":         func(o *Options) { o.AdminPort = 70000 },
		"negative port":      func(o *Options) { o.AdminPort = -1 },
		"prometheus port":    func(o *Options) { o.PrometheusPort = 65536 },
		"metadata not UTF-8": func(o *Options) { o.Metadata = map[string]string{"NAME": "\xff"} },
		"label not UTF-8":    func(o *Options) { o.Labels = map[string]string{"app": "\xfe"} },
	} {
		t.Run(name, func(t *testing.T) {
			o := testOptions()
			change(&o)
			if _, err := Build(o); err == nil {
				t.Error("Build accepted it")
			}
			if ref, err := refBuild(o); err == nil {
				if _, err := protojson.Marshal(ref); err == nil {
					t.Error("the reference accepts it: the case tests nothing")
				}
			}
		})
	}
}

// Every shape of the options (no SDS socket, no labels, only
// pod-template-hash, a partial locality, no node id, other ports) gives
// the bootstrap the reference builds from Envoy's types.
func TestBuildEqualsReference(t *testing.T) {
	for name, change := range map[string]func(*Options){
		"as tested":          func(*Options) {},
		"no sds":             func(o *Options) { o.SDSSocketPath = "" },
		"no labels":          func(o *Options) { o.Labels = nil },
		"only template hash": func(o *Options) { o.Labels = map[string]string{"pod-template-hash": "x"} },
		"no metadata":        func(o *Options) { o.Metadata = nil; o.Labels = nil },
		"region only":        func(o *Options) { o.Locality = "us-east" },
		"zone and subzone":   func(o *Options) { o.Locality = "/z/s" },
		"no node id":         func(o *Options) { o.NodeID = ""; o.Cluster = "" },
		"ports":              func(o *Options) { o.AdminPort = 0; o.PrometheusPort = 16090 },
		"html in metadata":   func(o *Options) { o.Metadata = map[string]string{"X": "<a&b>"} },
	} {
		t.Run(name, func(t *testing.T) {
			o := testOptions()
			change(&o)
			got := built(t, o)
			ref, err := refBuild(o)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, ref) {
				t.Errorf("differs from the reference:\n got %v\nwant %v", got, ref)
			}
			if err := got.ValidateAll(); err != nil {
				t.Error(err)
			}
		})
	}
}

// Marshal writes what protojson writes, re-indented: the reference's
// protojson output decodes to the same JSON value.
func TestMarshalMatchesProtojson(t *testing.T) {
	o := testOptions()
	o.Locality = "r/z/s"
	b, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := refBuild(o)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(ref)
	if err != nil {
		t.Fatal(err)
	}
	var gotV, wantV any
	if err := json.Unmarshal(got, &gotV); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &wantV); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotV, wantV) {
		t.Errorf("JSON differs from protojson's:\n got %s\nwant %s", got, raw)
	}
}

func TestNodeLocality(t *testing.T) {
	o := testOptions()
	o.Locality = "us-east/us-east-1a/rack4"
	l := built(t, o).GetNode().GetLocality()
	if l.GetRegion() != "us-east" || l.GetZone() != "us-east-1a" || l.GetSubZone() != "rack4" {
		t.Errorf("node.locality = %v", l)
	}
	if b := built(t, testOptions()); b.GetNode().GetLocality() != nil {
		t.Errorf("no locality: node.locality = %v, want unset", b.GetNode().GetLocality())
	}
}
