package istiometrics

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/proxy/peermeta"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

var update = flag.Bool("update", false, "rewrite golden files")

var (
	productpage = peermeta.Workload{Instance: "productpage-v1-84975bc778-pxz2w", Namespace: "default", Workload: "productpage-v1",
		Cluster: "client-cluster", CanonicalService: "productpage-v1", CanonicalRevision: "version-1", App: "productpage", Version: "v1"}
	ratings = peermeta.Workload{Namespace: "default", Workload: "ratings-v1", Cluster: "server-cluster",
		CanonicalService: "ratings", CanonicalRevision: "version-1", App: "ratings", Version: "v1"}
	svc = Service{Host: "server.default.svc.cluster.local", Name: "server", Namespace: "default"}
)

// The label values of the cases istio/proxy's stats tests check
// (testdata/metric/server_request_total.yaml.tmpl and its client twin),
// and the unknown and gRPC cases.
func TestLabelsGolden(t *testing.T) {
	cases := []struct {
		name string
		tcp  bool
		e    Exchange
	}{
		{"destination, plaintext", false, Exchange{Reporter: Destination, Local: ratings, Peer: productpage, Service: svc, Protocol: "http", Code: 200, GRPCStatus: -1}},
		{"source, mtls", false, Exchange{Reporter: Source, Local: productpage, Peer: ratings, Service: svc, Protocol: "http", Code: 200, GRPCStatus: -1,
			LocalPrincipal: "spiffe://cluster.local/ns/default/sa/bookinfo-productpage", PeerPrincipal: "spiffe://cluster.local/ns/default/sa/bookinfo-ratings", MTLS: true}},
		{"destination, mtls, grpc", false, Exchange{Reporter: Destination, Local: ratings, Peer: productpage, Service: svc, Protocol: "grpc", Code: 200, GRPCStatus: 14,
			PeerPrincipal: "spiffe://cluster.local/ns/default/sa/bookinfo-productpage", MTLS: true}},
		{"source, peer unknown, no healthy upstream", false, Exchange{Reporter: Source, Local: productpage, Service: svc, Protocol: "http", Code: 503, GRPCStatus: -1, Flags: "UH"}},
		{"destination, tcp", true, Exchange{Reporter: Destination, Local: ratings, Peer: productpage, Service: svc, MTLS: true}},
	}
	var b strings.Builder
	for _, c := range cases {
		fmt.Fprintf(&b, "# %s\n", c.name)
		names, vals := HTTPLabels, AppendHTTP(nil, &c.e)
		if c.tcp {
			names, vals = TCPLabels, AppendTCP(nil, &c.e)
		}
		if len(vals) != len(names) {
			t.Fatalf("%s: %d values for %d labels", c.name, len(vals), len(names))
		}
		for i := range names {
			fmt.Fprintf(&b, "%s=%q\n", names[i], vals[i])
		}
	}
	p := "testdata/labels.golden"
	if *update {
		_ = os.WriteFile(p, []byte(b.String()), 0o644)
	}
	want, _ := os.ReadFile(p)
	if b.String() != string(want) {
		t.Errorf("labels differ:\n%s", b.String())
	}
}

func TestServiceFromCluster(t *testing.T) {
	for in, want := range map[string]Service{
		"outbound|9080||reviews.default.svc.cluster.local":   {"reviews.default.svc.cluster.local", "reviews", "default"},
		"outbound|9080|v2|reviews.default.svc.cluster.local": {"reviews.default.svc.cluster.local", "reviews", "default"},
		"outbound|443||www.example.com":                      {"www.example.com", "www.example.com", Unknown},
	} {
		if got, ok := ServiceFromCluster(in); !ok || got != want {
			t.Errorf("%s: %+v %v", in, got, ok)
		}
	}
	for _, in := range []string{"inbound|9080||", "PassthroughCluster", "outbound|80||"} {
		if _, ok := ServiceFromCluster(in); ok {
			t.Errorf("%s: accepted", in)
		}
	}
	for in, want := range map[string]string{"a.b:80": "a.b", "a.b": "a.b", "[::1]:8080": "::1", "10.0.0.1:80": "10.0.0.1", "a.b:x": "a.b", "a.b:": "a.b", "::1": "::1", "[::1]": "[::1]"} {
		if got := HostWithoutPort(in); got != want {
			t.Errorf("%s: %s", in, got)
		}
	}
}

// Labeling an exchange and recording it does not allocate once the
// series exists.
func TestRecordNoAlloc(t *testing.T) {
	m, err := NewHTTP(stats.New())
	if err != nil {
		t.Fatal(err)
	}
	e := Exchange{Reporter: Destination, Local: ratings, Peer: productpage, Service: svc, Protocol: "http", Code: 200, GRPCStatus: -1}
	buf := make([]string, 0, len(HTTPLabels))
	m.Record(AppendHTTP(buf, &e), 1, 10, 20)
	if n := testing.AllocsPerRun(100, func() { m.Record(AppendHTTP(buf[:0], &e), 1, 10, 20) }); n != 0 {
		t.Errorf("%v allocs per request", n)
	}
}
