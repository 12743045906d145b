package gen

import (
	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/proxypush"
)

// NeedsPush implements the xDS server's PushFilter: it narrows a push
// request to what concerns one proxy, or reports that the proxy does not
// depend on the change at all.
//
//   - A request that names nothing (IsGlobal) concerns everyone.
//   - A proxy whose IP is in AddressesUpdated gets a full push (its
//     inbound side, or the Sidecar picked by its labels, changed).
//   - A changed Sidecar, RequestAuthentication or Telemetry concerns the
//     proxies of its namespace (every proxy for one in the root namespace).
//   - A host in ServicesUpdated concerns the proxies whose scope reaches it
//     (exportTo and Sidecar egress hosts): for an endpoints-only request
//     that is exactly the proxies that have its clusters.
//   - Changed configs of other kinds than those above concern everyone.
//   - Every change of configs or services concerns a gateway (router).
func (g *Generator) NeedsPush(proxy *proxypush.Proxy, req *proxypush.PushRequest) (*proxypush.PushRequest, bool) {
	if req.IsGlobal() {
		return req, true
	}
	if proxy != nil {
		if _, ok := req.AddressesUpdated[proxy.IP]; ok {
			if req.Full {
				return req, true
			}
			r := *req
			r.Full = true
			return &r, true
		}
	}
	if isRouter(proxy) && (len(req.ConfigsUpdated) > 0 || len(req.ServicesUpdated) > 0) {
		// A gateway's routes come from VirtualServices bound to it by
		// name, whatever their hosts (gateway.go).
		return req, true
	}
	for k := range req.ConfigsUpdated {
		switch k.Kind {
		case istioconfig.KindServiceEntry, istioconfig.KindWorkloadEntry, istioconfig.KindVirtualService, istioconfig.KindDestinationRule:
			// Covered by ServicesUpdated and AddressesUpdated.
		case istioconfig.KindSidecar, istioconfig.KindRequestAuthentication, istioconfig.KindTelemetry:
			if proxy == nil || k.Namespace == proxy.Namespace || k.Namespace == g.snapshot().RootNamespace {
				return req, true
			}
		default:
			return req, true
		}
	}
	if len(req.ServicesUpdated) == 0 {
		return nil, false
	}
	snap := g.snapshot()
	scope := snap.ProxyScope(proxy)
	for host := range req.ServicesUpdated {
		if scope.DependsOn(snap, host) {
			return req, true
		}
	}
	return nil, false
}

// ChangedEndpoints implements the xDS server's EndpointsNarrower: the
// watched outbound clusters whose host is in req.ServicesUpdated. It cannot
// tell for a full or global request, or one that names no host.
func (g *Generator) ChangedEndpoints(_ *proxypush.Proxy, watched []string, req *proxypush.PushRequest) ([]string, bool) {
	if req.Full || len(req.ServicesUpdated) == 0 || len(watched) == 0 {
		return nil, false
	}
	var out []string
	for _, name := range watched {
		if _, _, host, ok := ParseOutboundClusterName(name); ok {
			if _, changed := req.ServicesUpdated[host]; changed {
				out = append(out, name)
			}
		}
	}
	return out, true
}
