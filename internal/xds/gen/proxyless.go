package gen

import (
	"fmt"
	"net"
	"strconv"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// ProxylessGeneratorMetadata is the node metadata key and value by which a
// proxyless gRPC client asks for gRPC-shaped resources, as in Istio
// (ISTIO_META_GENERATOR=grpc, or "GENERATOR": "grpc" in the bootstrap's
// node metadata).
const (
	ProxylessGeneratorMetadata = "GENERATOR"
	ProxylessGeneratorGRPC     = "grpc"
)

func isProxyless(p *proxypush.Proxy) bool {
	return p != nil && p.Metadata[ProxylessGeneratorMetadata] == ProxylessGeneratorGRPC
}

// generateProxyless builds resources for a proxyless gRPC client, which
// names what it wants: a listener "HOST:PORT" per target (an API listener
// whose HTTP connection manager points at the route configuration of the
// same name), that route configuration (one virtual host routing to the
// service's cluster, or as its VirtualServices say), and the EDS clusters
// and load assignments those routes use. No capture listeners, no
// ORIGINAL_DST clusters: gRPC would reject them.
func (g *Generator) generateProxyless(snap *mesh.Snapshot, scope *mesh.Scope, src routeSource, typeURL string, watched []string) ([]*discovery.Resource, error) {
	var msgs []namedMessage
	switch typeURL {
	case xdsapi.ListenerType:
		for _, name := range watched {
			if _, _, ok := g.proxylessTarget(snap, scope, name); !ok {
				continue
			}
			msgs = append(msgs, namedMessage{name, apiListener(name)})
		}
	case xdsapi.RouteType:
		for _, name := range watched {
			svc, port, ok := g.proxylessTarget(snap, scope, name)
			if !ok {
				continue
			}
			msgs = append(msgs, namedMessage{name, &route.RouteConfiguration{
				Name: name,
				VirtualHosts: []*route.VirtualHost{{
					Name:    name,
					Domains: []string{name, svc.Hostname},
					Routes:  proxylessTimeouts(httpRoutes(snap, svc, port, src)),
				}},
			}})
		}
	case xdsapi.ClusterType:
		var names []string
		if len(watched) == 0 {
			for _, svc := range scope.Services {
				for _, c := range serviceClusters(snap, scope.Namespace, svc) {
					names = append(names, c.Name)
				}
			}
		} else {
			names = watched
		}
		for _, name := range sortedUnique(names) {
			svc, port, _, ok := edsTarget(snap, scope, name)
			if !ok {
				continue
			}
			p, _ := svc.Port(port)
			c := edsCluster(name, p)
			c.TypedExtensionProtocolOptions = nil // gRPC speaks HTTP/2 anyway
			msgs = append(msgs, namedMessage{name, c})
		}
	case xdsapi.EndpointType:
		for _, name := range sortedUnique(watched) {
			if cla := clusterLoadAssignment(snap, scope, nil, name); cla != nil {
				// gRPC rejects localities without an ID and ignores
				// those without a weight.
				for _, l := range cla.Endpoints {
					if l.Locality == nil {
						l.Locality = &core.Locality{}
					}
					l.LoadBalancingWeight = wrapperspb.UInt32(1)
				}
				msgs = append(msgs, namedMessage{name, cla})
			}
		}
	default:
		return nil, fmt.Errorf("generate: unsupported type URL %q", typeURL)
	}
	out := make([]*discovery.Resource, 0, len(msgs))
	for _, m := range msgs {
		r, err := resource(m.name, m.msg)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// proxylessTarget resolves "HOST:PORT" (HOST a service FQDN or a short
// name in the client's namespace) to a service port in scope.
func (g *Generator) proxylessTarget(snap *mesh.Snapshot, scope *mesh.Scope, name string) (*mesh.Service, uint32, bool) {
	host, portStr, err := net.SplitHostPort(name)
	if err != nil {
		return nil, 0, false
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, 0, false
	}
	svc := snap.Service(snap.ResolveHost(host, scope.Namespace))
	if svc == nil || !svc.VisibleTo(scope.Namespace) || !scope.Includes(svc.Hostname, svc.Namespace) {
		return nil, 0, false
	}
	if _, ok := svc.Port(uint32(port)); !ok {
		return nil, 0, false
	}
	return svc, uint32(port), true
}

// apiListener is the listener gRPC's xDS resolver asks for: no address,
// an HTTP connection manager whose routes come from RDS.
func apiListener(name string) *listener.Listener {
	m := &hcm.HttpConnectionManager{
		StatPrefix: name,
		RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{
			RouteConfigName: name,
			ConfigSource:    rdsConfigSource(),
		}},
		HttpFilters: []*hcm.HttpFilter{{
			Name:       routerFilterName,
			ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerfilter.Router{})},
		}},
	}
	return &listener.Listener{
		Name:        name,
		ApiListener: &listener.ApiListener{ApiListener: mustAny(m)},
	}
}
