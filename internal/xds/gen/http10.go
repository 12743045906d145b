package gen

// HTTP/1.0 on a proxy's HTTP connection managers. Envoy answers an
// HTTP/1.0 request 426 unless http_protocol_options.accept_http_10 is set,
// and Istio sets it on every HCM of a proxy (inbound, outbound, gateway)
// whose node metadata HTTP10 is "1" (ISTIO_META_HTTP10 in the proxy's
// environment; enableHTTP10 in pilot/pkg/networking/core), or on every
// proxy when istiod runs with PILOT_HTTP10, which straitd does not have.

import (
	"fmt"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/straitmesh/strait/internal/proxypush"
)

// HTTP10Metadata is the node metadata key that asks for HTTP/1.0
// (ISTIO_META_HTTP10=1).
const HTTP10Metadata = "HTTP10"

// acceptsHTTP10 reports whether proxy's HCMs serve HTTP/1.0: its metadata
// HTTP10 is exactly "1", as Istio reads it.
func acceptsHTTP10(proxy *proxypush.Proxy) bool {
	return proxy != nil && proxy.Metadata[HTTP10Metadata] == "1"
}

// withHTTP10 sets accept_http_10 on every HTTP connection manager of ls
// (its typed_config decoded and encoded again, as addAccessLog does); a
// filter that chains share is set once.
func withHTTP10(ls ...*listener.Listener) {
	done := map[*listener.Filter]bool{}
	for _, l := range ls {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				if done[f] || f.GetName() != hcmFilterName {
					continue
				}
				done[f] = true
				h := &hcm.HttpConnectionManager{}
				if f.GetTypedConfig().UnmarshalTo(h) != nil {
					continue
				}
				if h.HttpProtocolOptions == nil {
					h.HttpProtocolOptions = &core.Http1ProtocolOptions{}
				}
				h.HttpProtocolOptions.AcceptHttp_10 = true
				f.ConfigType = &listener.Filter_TypedConfig{TypedConfig: mustAny(h)}
			}
		}
	}
}

// http10Listeners decodes the scope's shared listeners for a proxy that
// asks for HTTP/1.0 and returns them with accept_http_10 set, to be sent
// in their place.
func http10Listeners(shared []*discovery.Resource) ([]namedMessage, error) {
	out := make([]namedMessage, 0, len(shared))
	for _, r := range shared {
		l := &listener.Listener{}
		if err := r.GetResource().UnmarshalTo(l); err != nil {
			return nil, fmt.Errorf("listener %s: %w", r.GetName(), err)
		}
		withHTTP10(l)
		out = append(out, namedMessage{l.Name, l})
	}
	return out, nil
}

// listenersOf are the listeners among ms.
func listenersOf(ms []namedMessage) []*listener.Listener {
	var out []*listener.Listener
	for _, m := range ms {
		if l, ok := m.msg.(*listener.Listener); ok {
			out = append(out, l)
		}
	}
	return out
}
