package proxy

import (
	"crypto/sha256"
	"net/netip"
	"slices"
	"sync"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/straitmesh/strait/internal/proxy/admin"
	"github.com/straitmesh/strait/internal/proxy/listener"
)

var netipZero netip.AddrPort

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err) // only fails for nil messages
	}
	return a
}

// ConfigDump implements admin.Source, in Envoy's /config_dump shape. Each
// resource's last_updated is when the proxy applied that config of it
// (appliedTimes); with r.IncludeEDS the dump ends with the clusters'
// endpoints, as Envoy's ConfigDumpHandler::dumpEndpointConfigs lists them:
// one ClusterLoadAssignment per active cluster named for it, the static
// clusters' as static_endpoint_configs, the CDS ones' as dynamic (here
// the assignment as configured: EDS's, or the cluster's load_assignment;
// Envoy rebuilds it from its live hosts, with their health).
func (p *Proxy) ConfigDump(r admin.DumpRequest) (*adminv3.ConfigDump, error) {
	boot := &adminv3.BootstrapConfigDump{Bootstrap: p.opts.Bootstrap, LastUpdated: timestamppb.New(p.started)}
	at := p.applied.lookup

	cs := p.Clusters.Snapshot()
	clusters := &adminv3.ClustersConfigDump{VersionInfo: cs.CDSVersion}
	for _, c := range cs.Static {
		clusters.StaticClusters = append(clusters.StaticClusters, &adminv3.ClustersConfigDump_StaticCluster{
			Cluster: mustAny(c), LastUpdated: at(kindCluster, c.GetName(), c)})
	}
	for _, c := range cs.Dynamic {
		clusters.DynamicActiveClusters = append(clusters.DynamicActiveClusters, &adminv3.ClustersConfigDump_DynamicCluster{
			VersionInfo: cs.CDSVersion, Cluster: mustAny(c), LastUpdated: at(kindCluster, c.GetName(), c)})
	}
	for _, c := range cs.Warming {
		clusters.DynamicWarmingClusters = append(clusters.DynamicWarmingClusters, &adminv3.ClustersConfigDump_DynamicCluster{
			VersionInfo: cs.CDSVersion, Cluster: mustAny(c), LastUpdated: at(kindCluster, c.GetName(), c)})
	}

	lv, static, _ := p.Listeners.Snapshot()
	listeners := &adminv3.ListenersConfigDump{VersionInfo: lv}
	for _, l := range static {
		listeners.StaticListeners = append(listeners.StaticListeners, &adminv3.ListenersConfigDump_StaticListener{
			Listener: mustAny(l), LastUpdated: at(kindListener, l.GetName(), l)})
	}
	// A listener changed by LDS shows its serving version as active_state,
	// the one waiting for its routes as warming_state and the one it
	// replaced, while that drains, as draining_state, as Envoy's
	// ListenerManagerImpl::dumpListenerConfigs.
	for _, d := range p.Listeners.Dynamic() {
		dl := &adminv3.ListenersConfigDump_DynamicListener{Name: d.Name}
		state := func(version string, l *listenerv3.Listener) *adminv3.ListenersConfigDump_DynamicListenerState {
			return &adminv3.ListenersConfigDump_DynamicListenerState{VersionInfo: version, Listener: mustAny(l),
				LastUpdated: at(kindListener, d.Name, l)}
		}
		if d.Active != nil {
			dl.ActiveState = state(d.Active.Version, d.Active.Config)
		}
		if d.Warming != nil {
			dl.WarmingState = state(d.Warming.Version, d.Warming.Config)
		}
		if d.Draining != nil {
			dl.DrainingState = state(d.Draining.Version, d.Draining.Config)
		}
		listeners.DynamicListeners = append(listeners.DynamicListeners, dl)
	}

	rv, rcs := p.Routes.Snapshot()
	routes := &adminv3.RoutesConfigDump{}
	for _, rc := range rcs {
		routes.DynamicRouteConfigs = append(routes.DynamicRouteConfigs, &adminv3.RoutesConfigDump_DynamicRouteConfig{
			VersionInfo: rv, RouteConfig: mustAny(rc), LastUpdated: at(kindRoute, rc.GetName(), rc)})
	}

	configs := []*anypb.Any{mustAny(boot), mustAny(clusters), mustAny(listeners), mustAny(routes)}
	if r.IncludeEDS {
		byService := make(map[string]*endpointv3.ClusterLoadAssignment, len(cs.Endpoints))
		for _, cla := range cs.Endpoints {
			byService[cla.GetClusterName()] = cla
		}
		eps := &adminv3.EndpointsConfigDump{}
		for _, c := range cs.Static {
			eps.StaticEndpointConfigs = append(eps.StaticEndpointConfigs, &adminv3.EndpointsConfigDump_StaticEndpointConfig{
				EndpointConfig: mustAny(assignmentOf(c, byService))})
		}
		for _, c := range cs.Dynamic {
			eps.DynamicEndpointConfigs = append(eps.DynamicEndpointConfigs, &adminv3.EndpointsConfigDump_DynamicEndpointConfig{
				EndpointConfig: mustAny(assignmentOf(c, byService))})
		}
		configs = append(configs, mustAny(eps))
	}
	return &adminv3.ConfigDump{Configs: configs}, nil
}

// assignmentOf is cluster c's endpoints for the dump, named for c: its EDS
// assignment (by service name), else its load_assignment, else none.
func assignmentOf(c *clusterv3.Cluster, byService map[string]*endpointv3.ClusterLoadAssignment) *endpointv3.ClusterLoadAssignment {
	cla := c.GetLoadAssignment()
	if c.GetType() == clusterv3.Cluster_EDS {
		service := c.GetEdsClusterConfig().GetServiceName()
		if service == "" {
			service = c.GetName()
		}
		cla = byService[service]
	}
	if cla == nil {
		return &endpointv3.ClusterLoadAssignment{ClusterName: c.GetName()}
	}
	if cla.GetClusterName() != c.GetName() {
		cla = proto.Clone(cla).(*endpointv3.ClusterLoadAssignment)
		cla.ClusterName = c.GetName()
	}
	return cla
}

// Kinds of resource whose apply times appliedTimes keeps.
const (
	kindCluster = iota
	kindListener
	kindRoute
)

// appliedTimes remembers when the proxy applied each config of each
// resource (a static one: at start-up), for the dump's last_updated, as
// Envoy stamps a resource when it adds or changes it: a resource sent
// again unchanged keeps its time. A resource may show a few configs at
// once (a listener's active, warming and draining versions); after each
// apply, the configs of that kind no longer shown are forgotten. A config
// is known by its configSum, not kept: holding the messages would keep
// every decoded Cluster alive after the cluster manager dropped it
// (cluster/configwire.go).
type appliedTimes struct {
	mu    sync.Mutex // guards names
	names map[appliedKey][]appliedConfig
}

type appliedKey struct {
	kind int
	name string
}

type appliedConfig struct {
	sum configSum
	at  time.Time
}

// configSum identifies a config: the SHA-256 of its deterministic wire
// form, so that equal configs (proto.Equal) have equal sums.
type configSum [sha256.Size]byte

// sumOf is m's configSum.
func sumOf(m proto.Message) configSum {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic(err) // only fails for invalid UTF-8, which decoding refused
	}
	return sha256.Sum256(b)
}

// record notes that the config whose sum is sum was applied as the
// resource name at now, unless the resource already has that config.
func (a *appliedTimes) record(kind int, name string, sum configSum, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := appliedKey{kind, name}
	for _, e := range a.names[k] {
		if e.sum == sum {
			return
		}
	}
	if a.names == nil {
		a.names = map[appliedKey][]appliedConfig{}
	}
	a.names[k] = append(a.names[k], appliedConfig{sum: sum, at: now})
}

// keep forgets the configs of kind that live does not list under their
// name.
func (a *appliedTimes) keep(kind int, live map[string][]configSum) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, list := range a.names {
		if k.kind != kind {
			continue
		}
		list = slices.DeleteFunc(list, func(e appliedConfig) bool { return !slices.Contains(live[k.name], e.sum) })
		if len(list) == 0 {
			delete(a.names, k)
		} else {
			a.names[k] = list
		}
	}
}

// lookup returns when config was applied as the resource name (nil if
// never: the dump then leaves last_updated out).
func (a *appliedTimes) lookup(kind int, name string, config proto.Message) *timestamppb.Timestamp {
	sum := sumOf(config)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.names[appliedKey{kind, name}] {
		if e.sum == sum {
			return timestamppb.New(e.at)
		}
	}
	return nil
}

// appliedClusters records the clusters an update (or the bootstrap)
// applied and forgets the configs no longer shown.
func (p *Proxy) appliedClusters(cs []*clusterv3.Cluster) {
	now := time.Now()
	for _, c := range cs {
		p.applied.record(kindCluster, c.GetName(), sumOf(c), now)
	}
	live := map[string][]configSum{}
	p.Clusters.EachConfig(func(name string, wire []byte) {
		live[name] = append(live[name], sha256.Sum256(wire))
	})
	p.applied.keep(kindCluster, live)
}

// appliedListeners is appliedClusters for listeners (static, and LDS ones
// active, warming or draining).
func (p *Proxy) appliedListeners(ls []*listenerv3.Listener) {
	now := time.Now()
	for _, l := range ls {
		p.applied.record(kindListener, l.GetName(), sumOf(l), now)
	}
	_, static, _ := p.Listeners.Snapshot()
	live := map[string][]configSum{}
	for _, l := range static {
		live[l.GetName()] = append(live[l.GetName()], sumOf(l))
	}
	for _, d := range p.Listeners.Dynamic() {
		for _, st := range []*listener.ListenerState{d.Active, d.Warming, d.Draining} {
			if st != nil {
				live[d.Name] = append(live[d.Name], sumOf(st.Config))
			}
		}
	}
	p.applied.keep(kindListener, live)
}

// appliedRoutes is appliedClusters for route configurations.
func (p *Proxy) appliedRoutes(rcs []*routev3.RouteConfiguration) {
	now := time.Now()
	for _, rc := range rcs {
		p.applied.record(kindRoute, rc.GetName(), sumOf(rc), now)
	}
	live := map[string][]configSum{}
	p.Routes.EachConfig(func(name string, wire []byte) {
		live[name] = append(live[name], sha256.Sum256(wire))
	})
	p.applied.keep(kindRoute, live)
}
