package listener

import (
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/hcm"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// rdsListener is an HTTP listener on hostport whose routes come over RDS
// as route configuration rds; fetchTimeout, when not nil, is its config
// source's initial_fetch_timeout.
func rdsListener(t *testing.T, name, hostport, rds string, fetchTimeout *durationpb.Duration) *listenerv3.Listener {
	t.Helper()
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix: name,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: rds, ConfigSource: &corev3.ConfigSource{
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			InitialFetchTimeout:   fetchTimeout,
		}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &listenerv3.Listener{Name: name, Address: addr(hostport), FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
		Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: h}}}}}}
}

func warmingManager(t *testing.T) (*Manager, *route.Store, *stats.Store) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	st := stats.New()
	routes := route.NewStore()
	cm := cluster.NewManager(log, st)
	t.Cleanup(cm.Close)
	srv := hcm.NewServer(hcm.Options{Logger: log, Clusters: cm})
	t.Cleanup(func() { srv.Close() })
	m := NewManager(Options{Logger: log, Stats: st, Routes: routes, Clusters: cm, HTTP: srv})
	t.Cleanup(m.Close)
	return m, routes, st
}

func emptyRoutes(names ...string) []*routev3.RouteConfiguration {
	var out []*routev3.RouteConfiguration
	for _, n := range names {
		out = append(out, &routev3.RouteConfiguration{Name: n})
	}
	return out
}

// freeTCP returns a loopback address nothing listens on.
func freeTCP(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func connectRefused(t *testing.T, a string) bool {
	t.Helper()
	c, err := net.DialTimeout("tcp", a, 2*time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return strings.Contains(err.Error(), "refused")
}

// A warming listener's address is bound but does not listen: connects are
// refused. Once its routes come it listens on that socket. (With
// SO_REUSEADDR, which Go's listeners and Envoy's set, Linux lets another
// socket bind the address as long as neither listens, so the reservation
// keeps out listening sockets only.)
func TestWarmingListenerReservesItsAddress(t *testing.T) {
	m, routes, st := warmingManager(t)
	a := freeTCP(t)
	names, err := m.ApplyLDS("1", []*listenerv3.Listener{rdsListener(t, "l", a, "r", nil)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"r"}) {
		t.Errorf("RDS names = %v, want [r]: a warming listener's routes must be subscribed", names)
	}
	if m.Warming() != 1 || st.Gauge("listener_manager.total_listeners_warming").Load() != 1 {
		t.Fatalf("warming = %d, gauge %d; want 1", m.Warming(), st.Gauge("listener_manager.total_listeners_warming").Load())
	}
	if !connectRefused(t, a) {
		t.Error("a warming listener accepts connections")
	}
	m.mu.Lock()
	r := m.reserved["l"]
	m.mu.Unlock()
	if r == nil || r.addr.String() != a {
		t.Errorf("reservation of l = %+v, want one for %s", r, a)
	}
	if _, ok := m.Addr("l"); ok {
		t.Error("a warming listener has a listening socket")
	}
	if err := routes.Apply("1", emptyRoutes("r")); err != nil {
		t.Fatal(err)
	}
	m.RoutesUpdated()
	if m.Warming() != 0 {
		t.Fatal("still warming once its routes came")
	}
	if got, ok := m.Addr("l"); !ok || got.String() != a {
		t.Errorf("warmed listener's address = %v %t, want %s", got, ok, a)
	}
	c, err := net.DialTimeout("tcp", a, 2*time.Second)
	if err != nil {
		t.Fatalf("warmed listener refuses: %v", err)
	}
	c.Close()
}

// An LDS update whose warming listener cannot bind its address is refused
// now, naming the listener, as Envoy refuses it when it creates the socket.
func TestWarmingListenerAddressInUseIsRefused(t *testing.T) {
	m, _, _ := warmingManager(t)
	foreign, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer foreign.Close()
	_, err = m.ApplyLDS("1", []*listenerv3.Listener{rdsListener(t, "busy", foreign.Addr().String(), "r", nil)})
	if err == nil || !strings.Contains(err.Error(), `listener "busy"`) || !strings.Contains(err.Error(), "bind") {
		t.Fatalf("err = %v, want a bind error naming listener busy", err)
	}
	if m.Warming() != 0 {
		t.Error("a refused update left a warming listener")
	}
	// Two listeners, one warming, on one address.
	a := freeTCP(t)
	_, err = m.ApplyLDS("2", []*listenerv3.Listener{rdsListener(t, "x", a, "r", nil), rdsListener(t, "y", a, "r", nil)})
	if err == nil || !strings.Contains(err.Error(), "already used by listener") {
		t.Fatalf("err = %v, want an address clash", err)
	}
}

// An update back to the active version drops the warming one; a warming
// listener that LDS removes goes, and its address is free again.
func TestWarmingListenerRevertedAndRemoved(t *testing.T) {
	m, routes, st := warmingManager(t)
	if err := routes.Apply("1", emptyRoutes("r1")); err != nil {
		t.Fatal(err)
	}
	a, b := freeTCP(t), freeTCP(t)
	v1 := rdsListener(t, "a", a, "r1", nil)
	if _, err := m.ApplyLDS("1", []*listenerv3.Listener{v1}); err != nil {
		t.Fatal(err)
	}
	if m.Warming() != 0 {
		t.Fatal("a listener whose routes are there warms")
	}
	names, err := m.ApplyLDS("2", []*listenerv3.Listener{rdsListener(t, "a", a, "r2", nil), rdsListener(t, "b", b, "r3", nil)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"r1", "r2", "r3"}) {
		t.Errorf("RDS names while warming = %v, want the active version's r1 and the warming r2, r3", names)
	}
	dyn := m.Dynamic()
	if len(dyn) != 2 || dyn[0].Active == nil || dyn[0].Active.Version != "1" || dyn[0].Warming == nil || dyn[0].Warming.Version != "2" ||
		dyn[1].Active != nil || dyn[1].Warming == nil {
		t.Errorf("Dynamic() = %+v, want a active@1 warming@2, b warming only", dyn)
	}
	if _, err := m.ApplyLDS("3", []*listenerv3.Listener{v1}); err != nil {
		t.Fatal(err)
	}
	if m.Warming() != 0 {
		t.Errorf("warming = %d after reverting a and removing b, want 0", m.Warming())
	}
	if ln, err := net.Listen("tcp", b); err != nil {
		t.Errorf("the removed warming listener's address %s: %v", b, err)
	} else {
		ln.Close()
	}
	if got, _ := m.Addr("a"); got == nil || got.String() != a {
		t.Errorf("the active version of a = %v, want still on %s", got, a)
	}
	if n := st.Counter("listener_manager.listener_removed").Load(); n != 1 {
		t.Errorf("listener_removed = %d, want 1", n)
	}
	if n := st.Counter("listener_manager.listener_modified").Load(); n != 2 {
		t.Errorf("listener_modified = %d, want 2 (a to r2, a back to r1)", n)
	}
	if len(m.fetches) != 0 || len(m.reserved) != 0 {
		t.Errorf("fetches %d, reservations %d left with nothing warming", len(m.fetches), len(m.reserved))
	}
}

// initial_fetch_timeout 0 sets no timer; a negative one is refused by name.
func TestInitialFetchTimeoutConfig(t *testing.T) {
	m, _, _ := warmingManager(t)
	if _, err := m.ApplyLDS("1", []*listenerv3.Listener{rdsListener(t, "l", freeTCP(t), "r", durationpb.New(0))}); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	f := m.fetches["r"]
	m.mu.Unlock()
	if f == nil || f.timer != nil {
		t.Errorf("fetch of r = %+v, want one without a timer (initial_fetch_timeout 0 waits for ever)", f)
	}
	_, err := m.ApplyLDS("2", []*listenerv3.Listener{rdsListener(t, "l", freeTCP(t), "r", durationpb.New(-time.Second))})
	if err == nil || !strings.Contains(err.Error(), "initial_fetch_timeout") {
		t.Errorf("err = %v, want initial_fetch_timeout named", err)
	}
}

// A warm listener that cannot listen (another socket took the address
// meanwhile, which SO_REUSEADDR lets a listening socket do) is dropped and
// counted as listener_create_failure; the version it was to replace keeps
// serving.
func TestWarmListenerThatCannotListenIsDropped(t *testing.T) {
	m, routes, st := warmingManager(t)
	if err := routes.Apply("1", emptyRoutes("r1")); err != nil {
		t.Fatal(err)
	}
	a, b := freeTCP(t), freeTCP(t)
	if _, err := m.ApplyLDS("1", []*listenerv3.Listener{rdsListener(t, "l", a, "r1", nil)}); err != nil {
		t.Fatal(err)
	}
	// The new version moves to b and waits for r2.
	if _, err := m.ApplyLDS("2", []*listenerv3.Listener{rdsListener(t, "l", b, "r2", nil)}); err != nil {
		t.Fatal(err)
	}
	foreign, err := net.Listen("tcp", b)
	if err != nil {
		t.Fatalf("a listening socket could not share the reserved address: %v", err)
	}
	defer foreign.Close()
	if err := routes.Apply("2", emptyRoutes("r1", "r2")); err != nil {
		t.Fatal(err)
	}
	m.RoutesUpdated()
	if m.Warming() != 0 {
		t.Error("the listener that could not listen still warms")
	}
	if n := st.Counter("listener_manager.listener_create_failure").Load(); n != 1 {
		t.Errorf("listener_create_failure = %d, want 1", n)
	}
	if got, ok := m.Addr("l"); !ok || got.String() != a {
		t.Errorf("listener l = %v %t, want the old version still on %s", got, ok, a)
	}
	if dyn := m.Dynamic(); len(dyn) != 1 || dyn[0].Active == nil || dyn[0].Active.Version != "1" || dyn[0].Warming != nil {
		t.Errorf("Dynamic() = %+v, want l active@1 only", dyn)
	}
}
