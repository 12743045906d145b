package proxy

import (
	"net"
	"strconv"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/admin"
	"github.com/straitmesh/strait/internal/proxy/xdstest"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// twoChainListener is an HTTP listener on 0.0.0.0:port with one filter
// chain per entry of rds: connections to 127.0.0.<i+1> get the chain of
// rds[i], named "c<i+1>", whose routes are route configuration rds[i].
func twoChainListener(t *testing.T, name string, port int, rds ...string) *listenerv3.Listener {
	t.Helper()
	l := httpListener(t, name, net.JoinHostPort("0.0.0.0", strconv.Itoa(port)), rds[0])
	l.FilterChains = nil
	for i, r := range rds {
		fc := httpListener(t, name, "127.0.0.1:1", r).FilterChains[0]
		fc.Name = "c" + strconv.Itoa(i+1)
		fc.FilterChainMatch = &listenerv3.FilterChainMatch{PrefixRanges: []*corev3.CidrRange{{
			AddressPrefix: "127.0.0." + strconv.Itoa(i+1), PrefixLen: wrapperspb.UInt32(32)}}}
		l.FilterChains = append(l.FilterChains, fc)
	}
	return l
}

// dynamicListener returns the config dump's entry for the named LDS
// listener (nil when there is none).
func dynamicListener(t *testing.T, p *Proxy, name string) *adminv3.ListenersConfigDump_DynamicListener {
	t.Helper()
	d, err := p.ConfigDump(admin.DumpRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range d.GetConfigs() {
		var ld adminv3.ListenersConfigDump
		if a.UnmarshalTo(&ld) != nil {
			continue
		}
		for _, dl := range ld.GetDynamicListeners() {
			if dl.GetName() == name {
				return dl
			}
		}
	}
	return nil
}

func ldsVersion(t *testing.T, p *Proxy, version string) {
	t.Helper()
	waitFor(t, 10*time.Second, "LDS version "+version, func() bool {
		v, _, _ := p.Listeners.Snapshot()
		return v == version && p.Listeners.Warming() == 0
	})
}

// An LDS update that changes only a listener's filter chains keeps its
// socket and the connections on the chains it leaves unchanged; only the
// connections on the chain it changed drain (an idle one closes, one with
// a request in flight gets its response with connection: close), and the
// config dump shows no draining listener. An update that changes anything
// else drains every connection and the config dump shows the replaced
// version as draining_state, also once LDS removes the listener.
func TestInPlaceFilterChainUpdate(t *testing.T) {
	srv := xdstest.Start(t)
	be, release, arrived := slowBackend(t)
	port := 0
	{
		_, ps, err := net.SplitHostPort(freeAddr(t))
		if err != nil {
			t.Fatal(err)
		}
		port, _ = strconv.Atoi(ps)
	}
	one, two := "127.0.0.1:"+strconv.Itoa(port), "127.0.0.2:"+strconv.Itoa(port)
	srv.Set(xdsapi.ClusterType, "1", edsCluster("a"))
	srv.Set(xdsapi.EndpointType, "1", cla("a", be.Listener.Addr().String()))
	srv.Set(xdsapi.RouteType, "1", singleRoute("r1", "a"), singleRoute("r2", "a"), singleRoute("r2b", "a"))
	srv.Set(xdsapi.ListenerType, "1", twoChainListener(t, "http", port, "r1", "r2"))
	p := startDrainProxy(t, srv)

	kept, idleChanged, busyChanged := dialRaw(t, one), dialRaw(t, two), dialRaw(t, two)
	for _, c := range []*rawConn{kept, idleChanged, busyChanged} {
		if !c.stillOpen(t) {
			t.Fatal("keep-alive connection not usable before the update")
		}
	}
	busyChanged.send(t, "/slow")
	<-arrived

	// Chain c1 unchanged, c2 now names other routes.
	srv.Set(xdsapi.ListenerType, "2", twoChainListener(t, "http", port, "r1", "r2b"))
	ldsVersion(t, p, "2")
	if !idleChanged.closedByPeer() {
		t.Error("the idle connection on the changed chain was not drained")
	}
	close(release)
	if code, body, closing := busyChanged.response(t); code != 200 || body != "ok" || !closing {
		t.Errorf("in-flight response on the changed chain = %d %q close=%t, want 200 ok with connection: close", code, body, closing)
	}
	if !busyChanged.closedByPeer() {
		t.Error("the busy connection on the changed chain is still open after its response")
	}
	if !kept.stillOpen(t) {
		t.Error("the connection on the unchanged chain was drained by a filter-chain-only update")
	}
	if n := p.Stats.Counter("listener_manager.listener_in_place_updated").Load(); n != 1 {
		t.Errorf("listener_in_place_updated = %d, want 1", n)
	}
	if dl := dynamicListener(t, p, "http"); dl.GetActiveState().GetVersionInfo() != "2" || dl.GetDrainingState() != nil {
		t.Errorf("config dump after the in-place update = %v, want active@2 and no draining_state", dl)
	}
	if fresh := dialRaw(t, two); !fresh.stillOpen(t) {
		t.Error("the changed chain does not serve new connections")
	}

	// Anything else changed: the whole listener drains.
	full := twoChainListener(t, "http", port, "r1", "r2b")
	full.StatPrefix = "v3"
	srv.Set(xdsapi.ListenerType, "3", full)
	ldsVersion(t, p, "3")
	if !kept.closedByPeer() {
		t.Error("a full listener update left the connection of an unchanged chain open")
	}
	if n := p.Stats.Counter("listener_manager.listener_in_place_updated").Load(); n != 1 {
		t.Errorf("listener_in_place_updated = %d after a full update, want still 1", n)
	}
	dl := dynamicListener(t, p, "http")
	if dl.GetActiveState().GetVersionInfo() != "3" || dl.GetDrainingState().GetVersionInfo() != "2" {
		t.Errorf("config dump after a full update = %v, want active@3 and draining_state@2", dl)
	}
	var drained listenerv3.Listener
	if err := dl.GetDrainingState().GetListener().UnmarshalTo(&drained); err != nil || drained.GetStatPrefix() != "" {
		t.Errorf("draining_state holds %v (%v), want the replaced version (no stat_prefix)", &drained, err)
	}
	if g := gauge(p, "listener_manager.total_listeners_draining"); g != 1 {
		t.Errorf("total_listeners_draining = %d, want 1", g)
	}

	// Removed: only its draining version is left in the dump.
	srv.Set(xdsapi.ListenerType, "4")
	ldsVersion(t, p, "4")
	dl = dynamicListener(t, p, "http")
	if dl.GetActiveState() != nil || dl.GetWarmingState() != nil || dl.GetDrainingState().GetVersionInfo() != "3" {
		t.Errorf("config dump of the removed listener = %v, want draining_state@3 only", dl)
	}
	if g := gauge(p, "listener_manager.total_listeners_draining"); g != 2 {
		t.Errorf("total_listeners_draining = %d, want 2", g)
	}
}
