package gen

import (
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/straitmesh/strait/internal/mesh"
)

func TestServiceShortName(t *testing.T) {
	for host, want := range map[string]string{
		"echo.demo.svc.cluster.local": "echo",
		"echo.demo.svc":               "echo",
		"api.example.com":             "api.example.com",
		"localhost":                   "localhost",
		"a.b.svcx.local":              "a.b.svcx.local",
	} {
		if got := serviceShortName(host); got != want {
			t.Errorf("serviceShortName(%q) = %q, want %q", host, got, want)
		}
	}
}

// An inbound port two services target lists both, each host once, in
// order; no service leaves the metadata unset.
func TestApplyServiceMetadata(t *testing.T) {
	a := &mesh.Service{Hostname: "a.ns.svc.cluster.local", Namespace: "ns"}
	b := &mesh.Service{Hostname: "api.example.com", Namespace: "ext"}
	c := &cluster.Cluster{}
	applyServiceMetadata(c, a, b, a)
	list := c.GetMetadata().GetFilterMetadata()["istio"].GetFields()["services"].GetListValue().GetValues()
	if len(list) != 2 {
		t.Fatalf("services = %v, want 2", list)
	}
	for i, want := range [][3]string{{"a.ns.svc.cluster.local", "a", "ns"}, {"api.example.com", "api.example.com", "ext"}} {
		f := list[i].GetStructValue().GetFields()
		if got := [3]string{f["host"].GetStringValue(), f["name"].GetStringValue(), f["namespace"].GetStringValue()}; got != want {
			t.Errorf("services[%d] = %v, want %v", i, got, want)
		}
	}
	empty := &cluster.Cluster{}
	applyServiceMetadata(empty)
	if empty.Metadata != nil {
		t.Errorf("metadata without services: %v", empty.Metadata)
	}
}
