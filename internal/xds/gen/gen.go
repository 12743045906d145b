// Package gen translates the service model into Envoy v3 resources for one
// proxy: clusters (CDS), endpoints (EDS), listeners (LDS) and routes (RDS).
// The shapes are fixed by docs/contracts.md.
package gen

import (
	"fmt"
	"slices"
	"strings"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/nds"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// Source supplies the current mesh snapshot. *file.Registry implements it.
type Source interface {
	Snapshot() *mesh.Snapshot
}

// SourceFunc adapts a function to a Source.
type SourceFunc func() *mesh.Snapshot

// Snapshot calls f.
func (f SourceFunc) Snapshot() *mesh.Snapshot { return f() }

// Generator builds the xDS resources of a proxy from the snapshot its
// Source returns at call time. It holds no other state, so it is safe for
// concurrent use; each call reads one snapshot throughout.
type Generator struct {
	src   Source
	keys  KeySets // nil: a jwtRule's jwksUri gets the fail-closed key set (jwt.go)
	cache *cache
}

// Options are a Generator's optional parts.
type Options struct {
	// KeySets fetches the key sets of jwtRules with a jwksUri (jwt.go);
	// nil inlines the fail-closed key set for them.
	KeySets KeySets
}

// New returns a Generator that reads src.
func New(src Source) *Generator { return NewWithOptions(src, Options{}) }

// NewWithOptions returns a Generator that reads src, with opts.
func NewWithOptions(src Source, opts Options) *Generator {
	return &Generator{src: src, keys: opts.KeySets, cache: newCache()}
}

func (g *Generator) snapshot() *mesh.Snapshot {
	if s := g.src.Snapshot(); s != nil {
		return s
	}
	s, _ := mesh.Build(nil, mesh.BuildOptions{})
	return s
}

// Builds returns how many resources of each kind ("cluster", "eds",
// "listener", "route") the generator has built, not counting the proxy's
// own inbound ones: the cache at work. straitd exports it as
// strait_generator_builds_total (Collector).
func (g *Generator) Builds() map[string]int { return g.cache.Builds() }

// Generate implements the xDS server's Generator interface: it returns the
// complete set of resources of typeURL for proxy. For EDS and RDS, watched
// names the resources wanted (empty means all); unknown names are left out.
// For CDS and LDS watched is ignored (state of the world). Every Any is
// marshalled deterministically and every Resource carries a content
// Version.
//
// What proxies of one scope share comes from the cache (see cache); only
// the proxy's inbound side is built per call.
func (g *Generator) Generate(proxy *proxypush.Proxy, typeURL string, watched []string, _ *proxypush.PushRequest) ([]*discovery.Resource, error) {
	snap := g.snapshot()
	scope := snap.ProxyScope(proxy)
	if isProxyless(proxy) {
		return g.generateProxyless(snap, scope, sourceOf(snap, scope, proxy), typeURL, watched)
	}
	switch typeURL {
	case xdsapi.EndpointType:
		return g.generateEndpoints(snap, scope, proxy, watched)
	case nds.TypeURL:
		return generateNameTable(scope, proxy) // nametable.go
	}
	if isRouter(proxy) && (typeURL == xdsapi.ListenerType || typeURL == xdsapi.RouteType) {
		return generateGateway(snap, proxy, typeURL, watched) // gateway.go
	}
	e, err := g.cache.scope(snap, scope)
	if err != nil {
		return nil, fmt.Errorf("generate %s: %w", typeURL, err)
	}
	var (
		shared []*discovery.Resource
		own    []namedMessage
	)
	switch typeURL {
	case xdsapi.ClusterType:
		shared = e.clusters
		if isRouter(proxy) {
			// A gateway has no inbound side, and its clusters of
			// resolution NONE services are EDS ones of its own.
			shared, own = routerClusters(snap, scope, shared)
			break
		}
		for _, c := range inboundClusters(snap, proxy) {
			own = append(own, namedMessage{c.Name, c})
		}
	case xdsapi.ListenerType:
		shared = e.listeners
		tp := telemetryFor(snap, scope) // telemetryapi.go
		for _, l := range inboundListeners(snap, proxy, g.keys) {
			withAccessLogs(snap, tp, l) // accesslog.go
			withTelemetry(tp, l)        // telemetry.go
			withTracing(snap, tp, l)    // tracing.go
			own = append(own, namedMessage{l.Name, l})
		}
		if len(e.byLabels) > 0 {
			// Listeners whose routes match on sourceLabels: this
			// proxy's own build replaces the shared one (tcproutes.go).
			labels, known := proxyLabels(snap, proxy)
			mine := map[string]bool{}
			for _, ll := range e.byLabels {
				l := ll.build(snap, &l4Source{ns: scope.Namespace, labels: labels, labelsKnown: known})
				withAccessLogs(snap, tp, l)
				withTelemetry(tp, l)
				withTracing(snap, tp, l)
				own = append(own, namedMessage{l.Name, l})
				mine[l.Name] = true
			}
			shared = slices.DeleteFunc(slices.Clone(shared), func(r *discovery.Resource) bool { return mine[r.Name] })
		}
		if acceptsHTTP10(proxy) { // http10.go
			withHTTP10(listenersOf(own)...)
			ls, err := http10Listeners(shared)
			if err != nil {
				return nil, fmt.Errorf("generate %s: %w", typeURL, err)
			}
			own, shared = append(own, ls...), nil
		}
	case xdsapi.RouteType:
		routes, err := g.cache.routesFor(e, sourceOf(snap, scope, proxy).labels)
		if err != nil {
			return nil, fmt.Errorf("generate %s: %w", typeURL, err)
		}
		if len(watched) == 0 {
			return slices.Clone(routes), nil
		}
		want := wanted(watched)
		var out []*discovery.Resource
		for _, r := range routes {
			if want(r.Name) {
				out = append(out, r)
			}
		}
		return out, nil
	default:
		return nil, fmt.Errorf("generate: unsupported type URL %q", typeURL)
	}
	out := slices.Clone(shared)
	for _, m := range own {
		r, err := resource(m.name, m.msg)
		if err != nil {
			return nil, fmt.Errorf("generate %s %s: %w", typeURL, m.name, err)
		}
		out = append(out, r)
	}
	slices.SortStableFunc(out, func(a, b *discovery.Resource) int { return strings.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b *discovery.Resource) bool { return a.Name == b.Name }), nil
}

// generateEndpoints returns the load assignments of the watched clusters
// (every EDS cluster of the scope when watched is empty). Named clusters
// need no scope entry, so an endpoints push after a new snapshot does not
// build the scope's listeners and routes.
func (g *Generator) generateEndpoints(snap *mesh.Snapshot, scope *mesh.Scope, proxy *proxypush.Proxy, watched []string) ([]*discovery.Resource, error) {
	names := watched
	if len(names) == 0 {
		e, err := g.cache.scope(snap, scope)
		if err != nil {
			return nil, fmt.Errorf("generate %s: %w", xdsapi.EndpointType, err)
		}
		names = e.edsNames
	}
	names = sortedUnique(slices.Clone(names))
	out := make([]*discovery.Resource, 0, len(names))
	for _, n := range names {
		r, err := g.cache.loadAssignment(snap, scope, proxy, n)
		if err != nil {
			return nil, fmt.Errorf("generate %s %s: %w", xdsapi.EndpointType, n, err)
		}
		if r != nil {
			out = append(out, r)
		}
	}
	return out, nil
}

type namedMessage struct {
	name string
	msg  proto.Message
}

func marshalAny(m proto.Message) (*anypb.Any, error) {
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		return nil, err
	}
	return a, nil
}

// mustAny is for the typed configs built here from known-good messages.
func mustAny(m proto.Message) *anypb.Any {
	a, err := marshalAny(m)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", m, err))
	}
	return a
}

// wanted returns a filter for watched resource names; empty watches all.
func wanted(watched []string) func(string) bool {
	if len(watched) == 0 {
		return func(string) bool { return true }
	}
	set := make(map[string]bool, len(watched))
	for _, w := range watched {
		set[w] = true
	}
	return func(n string) bool { return set[n] }
}

func proxyIP(p *proxypush.Proxy) string {
	if p == nil {
		return ""
	}
	return p.IP
}

func sortedUnique[T interface{ ~uint32 | ~string }](xs []T) []T {
	slices.Sort(xs)
	return slices.Compact(xs)
}
