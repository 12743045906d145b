package bootstrap

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// summary is a stable text form of what the proxy takes from a bootstrap
// (protojson output is deliberately unstable, so it can't be a golden).
func summary(t *testing.T, b *bootstrapv3.Bootstrap) string {
	var s strings.Builder
	fmt.Fprintf(&s, "node %s cluster %s\n", b.GetNode().GetId(), b.GetNode().GetCluster())
	admin, err := AdminAddress(b)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&s, "admin %s\n", admin)
	if c, err := ADSCluster(b); err != nil {
		t.Fatal(err)
	} else if c != nil {
		n, a, err := EndpointAddress(c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&s, "ads cluster %s %s %s\n", c.GetName(), n, a)
	}
	for _, c := range b.GetStaticResources().GetClusters() {
		fmt.Fprintf(&s, "cluster %s %s", c.GetName(), c.GetType())
		for _, lle := range c.GetLoadAssignment().GetEndpoints() {
			for _, e := range lle.GetLbEndpoints() {
				n, a, _ := EndpointAddress(e.GetEndpoint().GetAddress())
				fmt.Fprintf(&s, " %s:%s", n, a)
			}
		}
		s.WriteString("\n")
	}
	for _, l := range b.GetStaticResources().GetListeners() {
		sa := l.GetAddress().GetSocketAddress()
		fmt.Fprintf(&s, "listener %s %s:%d chains=%d\n", l.GetName(), sa.GetAddress(), sa.GetPortValue(), len(l.GetFilterChains()))
	}
	return s.String()
}

func TestLoadGolden(t *testing.T) {
	for _, name := range []string{"agent.json", "static.yaml"} {
		t.Run(name, func(t *testing.T) {
			b, err := Load(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			got := summary(t, b)
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if got != string(want) {
				t.Errorf("summary mismatch:\n got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"unknown field":       {`{"nodee": {}}`, "nodee"},
		"bad yaml":            {"a: [", "YAML"},
		"invalid":             {`{"static_resources": {"clusters": [{"name": ""}]}}`, "invalid"},
		"missing ads cluster": {`{"dynamic_resources": {"ads_config": {"api_type": "GRPC", "transport_api_version": "V3", "grpc_services": [{"envoy_grpc": {"cluster_name": "xds-grpc"}}]}}}`, `"xds-grpc"`},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", name, err, tc.want)
		}
	}
}
