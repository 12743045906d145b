package cluster

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/straitmesh/strait/internal/proxy/istiometrics"
)

func TestIstioService(t *testing.T) {
	md := func(services ...any) *corev3.Metadata {
		l, err := structpb.NewList(services)
		if err != nil {
			t.Fatal(err)
		}
		return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
			"istio": {Fields: map[string]*structpb.Value{"services": structpb.NewListValue(l)}},
		}}
	}
	svc := func(host, name, ns string) map[string]any {
		m := map[string]any{"host": host}
		if name != "" {
			m["name"] = name
		}
		if ns != "" {
			m["namespace"] = ns
		}
		return m
	}
	for _, tc := range []struct {
		name string
		md   *corev3.Metadata
		want istiometrics.Service
		ok   bool
	}{
		{"none", nil, istiometrics.Service{}, false},
		{"other key", &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"envoy.lb": {}}}, istiometrics.Service{}, false},
		{"empty list", md(), istiometrics.Service{}, false},
		{"one", md(svc("echo.demo.svc.cluster.local", "echo", "demo")),
			istiometrics.Service{Host: "echo.demo.svc.cluster.local", Name: "echo", Namespace: "demo"}, true},
		{"the first of two", md(svc("a.ns.svc.cluster.local", "a", "ns"), svc("b.ns.svc.cluster.local", "b", "ns")),
			istiometrics.Service{Host: "a.ns.svc.cluster.local", Name: "a", Namespace: "ns"}, true},
		{"no name or namespace", md(svc("api.example.com", "", "")),
			istiometrics.Service{Host: "api.example.com", Name: "unknown", Namespace: "unknown"}, true},
		{"no host", md(map[string]any{"name": "x"}), istiometrics.Service{}, false},
		{"not a struct", md("echo"), istiometrics.Service{}, false},
	} {
		got, ok := istioService(tc.md)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: istioService = %+v, %t; want %+v, %t", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// A cluster built from istiod's metadata carries its service.
func TestBuildReadsIstioService(t *testing.T) {
	out := staticCluster(t, 1, func(c *clusterv3.Cluster) {
		c.Metadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"istio": {Fields: map[string]*structpb.Value{
			"services": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
				"host": structpb.NewStringValue("echo.demo.svc.cluster.local"), "name": structpb.NewStringValue("echo"), "namespace": structpb.NewStringValue("demo"),
			}})}}),
		}}}}
	})
	if !out.HasIstioService || out.IstioService.Host != "echo.demo.svc.cluster.local" || out.IstioService.Name != "echo" {
		t.Errorf("IstioService = %+v (%t)", out.IstioService, out.HasIstioService)
	}
}
