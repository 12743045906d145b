// Package configdump is strait-proxy's /config_dump: it builds Envoy's
// admin ConfigDump (bootstrap, clusters, listeners, route configurations
// and, when asked, endpoints) from the cluster manager, the listener
// manager and the route store (configdump.go), and keeps when each
// resource's config was applied, for each entry's last_updated
// (applied.go). The proxy (internal/proxy) tells it of every applied
// update and serves Dump through the admin server.
package configdump

import (
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/straitmesh/strait/internal/proxy/admin"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/listener"
	"github.com/straitmesh/strait/internal/proxy/route"
)

// Sources are what the dump shows. Set at creation, read-only.
type Sources struct {
	Bootstrap *bootstrapv3.Bootstrap
	// Started is when the proxy was built: the bootstrap's and static
	// resources' last_updated.
	Started   time.Time
	Clusters  *cluster.Manager
	Listeners *listener.Manager
	Routes    *route.Store
}

// Dumper builds the dump and remembers when each config was applied.
// Safe for concurrent use.
type Dumper struct {
	src     Sources
	applied appliedTimes
}

// New returns a Dumper of src.
func New(src Sources) *Dumper {
	return &Dumper{src: src}
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err) // only fails for nil messages
	}
	return a
}

// Dump is the configuration in Envoy's /config_dump shape. Each
// resource's last_updated is when the proxy applied that config of it
// (appliedTimes); with r.IncludeEDS the dump ends with the clusters'
// endpoints, as Envoy's ConfigDumpHandler::dumpEndpointConfigs lists them:
// one ClusterLoadAssignment per active cluster named for it, the static
// clusters' as static_endpoint_configs, the CDS ones' as dynamic (here
// the assignment as configured: EDS's, or the cluster's load_assignment;
// Envoy rebuilds it from its live hosts, with their health).
func (d *Dumper) Dump(r admin.DumpRequest) (*adminv3.ConfigDump, error) {
	boot := &adminv3.BootstrapConfigDump{Bootstrap: d.src.Bootstrap, LastUpdated: timestamppb.New(d.src.Started)}
	at := d.applied.lookup

	cs := d.src.Clusters.Snapshot()
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

	lv, static, _ := d.src.Listeners.Snapshot()
	listeners := &adminv3.ListenersConfigDump{VersionInfo: lv}
	for _, l := range static {
		listeners.StaticListeners = append(listeners.StaticListeners, &adminv3.ListenersConfigDump_StaticListener{
			Listener: mustAny(l), LastUpdated: at(kindListener, l.GetName(), l)})
	}
	// A listener changed by LDS shows its serving version as active_state,
	// the one waiting for its routes as warming_state and the one it
	// replaced, while that drains, as draining_state, as Envoy's
	// ListenerManagerImpl::dumpListenerConfigs.
	for _, dyn := range d.src.Listeners.Dynamic() {
		dl := &adminv3.ListenersConfigDump_DynamicListener{Name: dyn.Name}
		state := func(version string, l *listenerv3.Listener) *adminv3.ListenersConfigDump_DynamicListenerState {
			return &adminv3.ListenersConfigDump_DynamicListenerState{VersionInfo: version, Listener: mustAny(l),
				LastUpdated: at(kindListener, dyn.Name, l)}
		}
		if dyn.Active != nil {
			dl.ActiveState = state(dyn.Active.Version, dyn.Active.Config)
		}
		if dyn.Warming != nil {
			dl.WarmingState = state(dyn.Warming.Version, dyn.Warming.Config)
		}
		if dyn.Draining != nil {
			dl.DrainingState = state(dyn.Draining.Version, dyn.Draining.Config)
		}
		listeners.DynamicListeners = append(listeners.DynamicListeners, dl)
	}

	rv, rcs := d.src.Routes.Snapshot()
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
