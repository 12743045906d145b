package proxy

import (
	"io"
	"net/http"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/straitmesh/strait/internal/proxy/xdstest"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// adminDump reads the proxy's GET /config_dump with query q.
func adminDump(t *testing.T, p *Proxy, q string) *adminv3.ConfigDump {
	t.Helper()
	resp, err := http.Get("http://" + p.AdminAddr().String() + "/config_dump" + q)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/config_dump%s = %d %v", q, resp.StatusCode, err)
	}
	var d adminv3.ConfigDump
	if err := protojson.Unmarshal(body, &d); err != nil {
		t.Fatalf("/config_dump%s is not a ConfigDump: %v", q, err)
	}
	return &d
}

// dumpParts splits a dump into its typed parts (nil when absent).
type dumpParts struct {
	clusters  *adminv3.ClustersConfigDump
	listeners *adminv3.ListenersConfigDump
	routes    *adminv3.RoutesConfigDump
	endpoints *adminv3.EndpointsConfigDump
}

func partsOf(t *testing.T, d *adminv3.ConfigDump) dumpParts {
	t.Helper()
	var out dumpParts
	for _, a := range d.GetConfigs() {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		switch m := m.(type) {
		case *adminv3.ClustersConfigDump:
			out.clusters = m
		case *adminv3.ListenersConfigDump:
			out.listeners = m
		case *adminv3.RoutesConfigDump:
			out.routes = m
		case *adminv3.EndpointsConfigDump:
			out.endpoints = m
		}
	}
	return out
}

// TestConfigDumpIncludeEDSAndLastUpdated: /config_dump holds the clusters'
// endpoints only with ?include_eds (static clusters' as static, CDS ones'
// as dynamic, named for their cluster), and every cluster, listener and
// route configuration carries last_updated: when that config was applied,
// kept when an update sends it again unchanged, moved when it changes.
func TestConfigDumpIncludeEDSAndLastUpdated(t *testing.T) {
	srv := xdstest.Start(t)
	be := named(t, "a")
	l := freeAddr(t)
	srv.Set(xdsapi.ClusterType, "1", edsCluster("a"))
	srv.Set(xdsapi.EndpointType, "1", cla("a", be.Listener.Addr().String()))
	srv.Set(xdsapi.RouteType, "1", singleRoute("80", "a"))
	srv.Set(xdsapi.ListenerType, "1", httpListener(t, "l", l, "80"))
	before := time.Now()
	p := startDrainProxy(t, srv)

	if e := partsOf(t, adminDump(t, p, "")).endpoints; e != nil {
		t.Errorf("/config_dump without include_eds has endpoints: %v", e)
	}
	parts := partsOf(t, adminDump(t, p, "?include_eds"))
	if parts.endpoints == nil {
		t.Fatal("/config_dump?include_eds has no EndpointsConfigDump")
	}
	endpointsOf := func(name string, list []*endpointv3.ClusterLoadAssignment) string {
		for _, c := range list {
			if c.GetClusterName() == name {
				return c.GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetAddress()
			}
		}
		return ""
	}
	var static, dynamic []*endpointv3.ClusterLoadAssignment
	for _, e := range parts.endpoints.GetStaticEndpointConfigs() {
		var c endpointv3.ClusterLoadAssignment
		if err := e.GetEndpointConfig().UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		static = append(static, &c)
	}
	for _, e := range parts.endpoints.GetDynamicEndpointConfigs() {
		var c endpointv3.ClusterLoadAssignment
		if err := e.GetEndpointConfig().UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		dynamic = append(dynamic, &c)
	}
	if endpointsOf("a", dynamic) != "127.0.0.1" || endpointsOf("xds-grpc", static) != "127.0.0.1" || len(static) != 1 || len(dynamic) != 1 {
		t.Errorf("endpoints: static %v, dynamic %v; want xds-grpc static and a (EDS) dynamic", static, dynamic)
	}

	stamps := func(d dumpParts) map[string]*timestamppb.Timestamp {
		m := map[string]*timestamppb.Timestamp{}
		for _, c := range d.clusters.GetStaticClusters() {
			m["static cluster"] = c.GetLastUpdated()
		}
		for _, c := range d.clusters.GetDynamicActiveClusters() {
			m["cluster"] = c.GetLastUpdated()
		}
		for _, dl := range d.listeners.GetDynamicListeners() {
			m["listener"] = dl.GetActiveState().GetLastUpdated()
		}
		for _, rc := range d.routes.GetDynamicRouteConfigs() {
			m["route"] = rc.GetLastUpdated()
		}
		return m
	}
	first := stamps(parts)
	for _, what := range []string{"static cluster", "cluster", "listener", "route"} {
		ts := first[what]
		if ts == nil || ts.AsTime().Before(before) || ts.AsTime().After(time.Now()) {
			t.Errorf("%s last_updated = %v, want the time it was applied (after %v)", what, ts, before)
		}
	}

	// The cluster and routes come again unchanged, the listener changed.
	changed := httpListener(t, "l", l, "80")
	changed.StatPrefix = "v2"
	srv.Set(xdsapi.ClusterType, "2", edsCluster("a"))
	srv.Set(xdsapi.RouteType, "2", singleRoute("80", "a"))
	srv.Set(xdsapi.ListenerType, "2", changed)
	acked(t, srv, xdsapi.ClusterType, "2")
	acked(t, srv, xdsapi.RouteType, "2")
	acked(t, srv, xdsapi.ListenerType, "2")
	second := stamps(partsOf(t, adminDump(t, p, "")))
	for _, what := range []string{"static cluster", "cluster", "route"} {
		if !second[what].AsTime().Equal(first[what].AsTime()) {
			t.Errorf("%s sent again unchanged: last_updated %v, want it kept at %v", what, second[what].AsTime(), first[what].AsTime())
		}
	}
	if !second["listener"].AsTime().After(first["listener"].AsTime()) {
		t.Errorf("changed listener: last_updated %v, want later than %v", second["listener"].AsTime(), first["listener"].AsTime())
	}
}
