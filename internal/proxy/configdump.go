package proxy

import (
	"net/netip"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

var netipZero netip.AddrPort

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err) // only fails for nil messages
	}
	return a
}

// ConfigDump implements admin.Source, in Envoy's /config_dump shape.
func (p *Proxy) ConfigDump() (*adminv3.ConfigDump, error) {
	boot := &adminv3.BootstrapConfigDump{Bootstrap: p.opts.Bootstrap}

	cs := p.Clusters.Snapshot()
	clusters := &adminv3.ClustersConfigDump{VersionInfo: cs.CDSVersion}
	for _, c := range cs.Static {
		clusters.StaticClusters = append(clusters.StaticClusters, &adminv3.ClustersConfigDump_StaticCluster{Cluster: mustAny(c)})
	}
	for _, c := range cs.Dynamic {
		clusters.DynamicActiveClusters = append(clusters.DynamicActiveClusters,
			&adminv3.ClustersConfigDump_DynamicCluster{VersionInfo: cs.CDSVersion, Cluster: mustAny(c)})
	}
	for _, c := range cs.Warming {
		clusters.DynamicWarmingClusters = append(clusters.DynamicWarmingClusters,
			&adminv3.ClustersConfigDump_DynamicCluster{VersionInfo: cs.CDSVersion, Cluster: mustAny(c)})
	}

	lv, static, _ := p.Listeners.Snapshot()
	listeners := &adminv3.ListenersConfigDump{VersionInfo: lv}
	for _, l := range static {
		listeners.StaticListeners = append(listeners.StaticListeners, &adminv3.ListenersConfigDump_StaticListener{Listener: mustAny(l)})
	}
	// A listener changed by LDS shows its serving version as active_state,
	// the one waiting for its routes as warming_state and the one it
	// replaced, while that drains, as draining_state, as Envoy's
	// ListenerManagerImpl::dumpListenerConfigs.
	for _, d := range p.Listeners.Dynamic() {
		dl := &adminv3.ListenersConfigDump_DynamicListener{Name: d.Name}
		if d.Active != nil {
			dl.ActiveState = &adminv3.ListenersConfigDump_DynamicListenerState{VersionInfo: d.Active.Version, Listener: mustAny(d.Active.Config)}
		}
		if d.Warming != nil {
			dl.WarmingState = &adminv3.ListenersConfigDump_DynamicListenerState{VersionInfo: d.Warming.Version, Listener: mustAny(d.Warming.Config)}
		}
		if d.Draining != nil {
			dl.DrainingState = &adminv3.ListenersConfigDump_DynamicListenerState{VersionInfo: d.Draining.Version, Listener: mustAny(d.Draining.Config)}
		}
		listeners.DynamicListeners = append(listeners.DynamicListeners, dl)
	}

	rv, rcs := p.Routes.Snapshot()
	routes := &adminv3.RoutesConfigDump{}
	for _, rc := range rcs {
		routes.DynamicRouteConfigs = append(routes.DynamicRouteConfigs,
			&adminv3.RoutesConfigDump_DynamicRouteConfig{VersionInfo: rv, RouteConfig: mustAny(rc)})
	}

	eps := &adminv3.EndpointsConfigDump{}
	for _, cla := range cs.Endpoints {
		eps.DynamicEndpointConfigs = append(eps.DynamicEndpointConfigs,
			&adminv3.EndpointsConfigDump_DynamicEndpointConfig{VersionInfo: cs.EDSVersion, EndpointConfig: mustAny(cla)})
	}
	return &adminv3.ConfigDump{Configs: []*anypb.Any{
		mustAny(boot), mustAny(clusters), mustAny(listeners), mustAny(routes), mustAny(eps),
	}}, nil
}
