package xds

import (
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// pushOrder is the order of a full push: clusters before the endpoints they
// use, listeners before the routes they name (CDS → EDS → LDS → RDS), so that
// Envoy never refers to something it has not received.
var pushOrder = []string{xdsapi.ClusterType, xdsapi.EndpointType, xdsapi.ListenerType, xdsapi.RouteType}

// Generator builds the resources of one type for one proxy. It is the only
// thing the server knows about how configuration is translated; the
// generators in internal/xds/gen implement it.
//
// Contract:
//   - typeURL is one of the type URLs the proxy subscribed to (the
//     xdsapi type URLs, or any other the generator knows). An unknown type URL is an error.
//   - watched is the resource_names list of the proxy's subscription for that
//     type; empty means a wildcard subscription (CDS and LDS normally). For
//     EDS and RDS a generator returns only the named resources it knows.
//   - req says why the push happens (nil is never passed: a request from the
//     proxy itself carries proxypush.ProxyRequest). Generators may ignore it.
//   - Each returned Resource has Name set and Resource holding the typed
//     resource. Version may be set to a content hash of the resource (the
//     same bytes give the same Version); the server then compares versions
//     instead of hashing bytes, and delta xDS sends it as the resource's
//     version. Other fields are ignored. The returned slice is the complete
//     state of the world for that type. Marshal the Any deterministically
//     (anypb.MarshalFrom with proto.MarshalOptions{Deterministic: true}):
//     the server skips a push whose serialized resources are byte-identical
//     to what it last sent, and delta xDS sends only the resources whose
//     bytes (or Version) changed.
//   - Generate is called concurrently for different proxies and must not
//     modify proxy.
type Generator interface {
	Generate(proxy *proxypush.Proxy, typeURL string, watched []string, req *proxypush.PushRequest) ([]*discovery.Resource, error)
}

// GeneratorFunc adapts a function to a Generator.
type GeneratorFunc func(proxy *proxypush.Proxy, typeURL string, watched []string, req *proxypush.PushRequest) ([]*discovery.Resource, error)

// Generate calls f.
func (f GeneratorFunc) Generate(proxy *proxypush.Proxy, typeURL string, watched []string, req *proxypush.PushRequest) ([]*discovery.Resource, error) {
	return f(proxy, typeURL, watched, req)
}

var _ Generator = GeneratorFunc(nil)

// EndpointsNarrower is an optional generator feature (Options). For an
// endpoints-only push, ChangedEndpoints returns which of the watched EDS
// resource names req may have changed (for Strait's generator: the
// clusters of the hosts in req.ServicesUpdated), or false when it cannot
// tell. The server then generates only those and sends the ones whose
// version changed, instead of generating every watched resource to find
// them; it falls back to the whole set whenever that is not enough (a
// narrowed name that yields nothing, a NACK, a new subscription).
type EndpointsNarrower interface {
	ChangedEndpoints(proxy *proxypush.Proxy, watched []string, req *proxypush.PushRequest) ([]string, bool)
}
