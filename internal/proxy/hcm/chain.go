package hcm

// The HTTP filter chain of an HCM: built from its http_filters list in
// list order with the filters' factories (filters/http/registry), the router
// last, as Envoy requires; run on every codec through httpfilter.Stream
// (h1stream.go, h2stream.go). Decoders run in list order until one stops
// (it answered, or the stream was reset); the response head, upstream's or
// a local reply's, passes the ResponseEncoders of the filters that ran, in
// reverse order; every Completer is told once when the stream ends.

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/straitmesh/strait/internal/proxy/filters/http/registry"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/rbac"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
	"github.com/straitmesh/strait/internal/proxy/tracing"
)

// chain is an HCM's filters, immutable once buildChain returns. The
// slices of optional callbacks hold each implementing filter with its
// position, so that a codec pays nothing for a callback no filter has.
type chain struct {
	filters []httpfilter.Filter // the decoders before the router
	names   []string            // their names, the keys of per-route config
	// router is the list's last, terminal filter (filters/http/router): its
	// DecodeHeaders runs after the others', then the codec carries out
	// the route's upstream exchange.
	router httpfilter.Terminal
	// perRoute: some filter may be turned off by a route
	// (httpfilter.DisabledConfig), so decode looks at the route's config.
	encoders   []indexed[httpfilter.ResponseEncoder]
	tencoders  []indexed[httpfilter.TrailersEncoder]
	completers []indexed[httpfilter.Completer]
	// bodies are the filters that read the request body (body.go);
	// none: the codecs stream every body as before.
	bodies []indexed[httpfilter.BodyDecoder]
	// headerWriters are the filters that write request headers an app
	// trusts (jwt_authn's output headers), kept out of trailers
	// (forward/trailers.go).
	headerWriters []interface{ WritesHeader(string) bool }
}

type indexed[T any] struct {
	at int
	f  T
}

// buildChain builds the filters of list, whose last entry is named for the
// router (checked by Build), with the registry's factories: the router
// too (filters/http/router, which audits its config), and it must be the
// one terminal filter, the last. A filter the registry does not know is
// refused by name, unless marked is_optional (Envoy skips it then).
// buildChainWith puts first (the tracing filter) before them, so that it
// runs before every other and its span covers the whole stream.
func buildChain(list []*hcmv3.HttpFilter, reg *registry.Registry, ctx httpfilter.BuildContext) (*chain, error) {
	return buildChainWith(list, reg, ctx, nil)
}

// buildChainWith is buildChain after first.
func buildChainWith(list []*hcmv3.HttpFilter, reg *registry.Registry, ctx httpfilter.BuildContext, first httpfilter.Filter) (*chain, error) {
	ch := &chain{}
	if first != nil {
		ch.add(first.Name(), first) // at 0: tracing.FilterOptions.At
	}
	for i, hf := range list {
		last := i == len(list)-1
		name := hf.GetName()
		fac, ok := reg.Factory(name, hf.GetTypedConfig().GetTypeUrl())
		if !ok {
			// A filter Strait does not run is refused, also Istio's
			// telemetry and ALPN filters: accepting it would drop what it
			// does unseen.
			if hf.GetIsOptional() && !last {
				continue
			}
			return nil, fmt.Errorf("http filter %q is not supported", name)
		}
		if hf.GetDisabled() {
			return nil, fmt.Errorf("http_filters[%d] %q: disabled is not supported (list the filter enabled, or leave it out)", i, name)
		}
		if hf.GetConfigDiscovery() != nil {
			return nil, fmt.Errorf("http_filters[%d] %q: config_discovery is not supported (give typed_config)", i, name)
		}
		f, err := fac.Build(hf.GetTypedConfig(), ctx)
		if err != nil {
			return nil, fmt.Errorf("http_filters[%d] %q: %w", i, name, err)
		}
		if t, ok := f.(httpfilter.Terminal); ok != last {
			if ok {
				return nil, fmt.Errorf("http_filters[%d] %q: the terminal filter must be the last of http_filters", i, name)
			}
			return nil, fmt.Errorf("http_filters[%d] %q: the last of http_filters must be a terminal filter (the router)", i, name)
		} else if ok {
			ch.router = t
			continue
		}
		if _, ok := f.(httpfilter.BodyDecoder); ok && len(ch.bodies) == maxBodyDecoders {
			return nil, fmt.Errorf("http_filters[%d] %q: more than %d filters read the request body", i, name, maxBodyDecoders)
		}
		ch.add(name, f)
	}
	return ch, nil
}

// UseTracing gives the HCM's tracing (tracing.Parse, in Build) its
// reporter from the proxy's reporters, with the node and direction of
// UseNode (call it after UseNode, before UseStats): the tracing filter
// then runs first in the chain, on every codec. Without tracing it does
// nothing; with tracing and no reporters it fails, naming the field.
func (f *Filter) UseTracing(reps *tracing.Reporters) error {
	if f.tracing == nil {
		return nil
	}
	if reps == nil {
		return fmt.Errorf("tracing: this proxy has no span reporters")
	}
	tf, err := tracing.NewFilter(tracing.FilterOptions{Config: f.tracing, Reporter: reps.For(f.tracing.Provider),
		Node: f.node, Direction: f.direction, At: 0})
	if err != nil {
		return err
	}
	f.traceFilter = tf
	ch, err := buildChainWith(f.httpFilters, f.registry, httpfilter.BuildContext{StatPrefix: "http." + f.StatPrefix + ".",
		Node: f.node, Direction: f.direction}, tf)
	if err != nil {
		return err
	}
	f.chain = ch
	return nil
}

// add appends f, named name in the list.
func (ch *chain) add(name string, f httpfilter.Filter) {
	at := len(ch.filters)
	ch.filters = append(ch.filters, f)
	ch.names = append(ch.names, name)
	if e, ok := f.(httpfilter.ResponseEncoder); ok {
		ch.encoders = append(ch.encoders, indexed[httpfilter.ResponseEncoder]{at, e})
	}
	if e, ok := f.(httpfilter.TrailersEncoder); ok {
		ch.tencoders = append(ch.tencoders, indexed[httpfilter.TrailersEncoder]{at, e})
	}
	if b, ok := f.(httpfilter.BodyDecoder); ok {
		ch.bodies = append(ch.bodies, indexed[httpfilter.BodyDecoder]{at, b})
	}
	if c, ok := f.(httpfilter.Completer); ok {
		ch.completers = append(ch.completers, indexed[httpfilter.Completer]{at, c})
	}
	if w, ok := f.(interface{ WritesHeader(string) bool }); ok {
		ch.headerWriters = append(ch.headerWriters, w)
	}
}

// writesHeader reports whether a filter writes the request header name.
func (ch *chain) writesHeader(name string) bool {
	for _, w := range ch.headerWriters {
		if w.WritesHeader(name) {
			return true
		}
	}
	return false
}

// filterState is what the chain keeps for the request in progress, shared
// by the codecs' Streams; reset for every request.
type filterState struct {
	f *Filter
	// rreq is the request as routing and RBAC read it, set by the codec
	// before the chain runs.
	rreq   route.Request
	rt     *route.Route
	rtDone bool // rt was chosen (nil: no route)
	rview  routeView
	// ran is how many filters' decoders ran: the encoders of those see
	// the response. replied: a filter answered (LocalReply).
	ran     int
	replied bool
	// flags are the response flags filters added ("DI"); addResp the
	// response fields they set (AddResponseHeader).
	flags   string
	addResp []headerPair
	scratch []any
	start   time.Time // for Completers; zero without any
	// epoch is a full reading of the clock (wall and monotonic) from
	// which start is derived by a monotonic reading alone, one clock
	// read per request instead of two; read again each epochSpan, so
	// that start's wall time is within that span's clock adjustments.
	epoch time.Time
	// bodyOn has bit i set when chain.bodies[i] decodes the request's
	// body (body.go).
	bodyOn uint64
	// info is what the Completers are told, kept here so that handing
	// them a pointer costs no allocation per request.
	info httpfilter.StreamInfo
}

type headerPair struct{ name, value string }

// reset readies st for a request on f.
func (st *filterState) reset(f *Filter) {
	st.f = f
	st.rt, st.rtDone = nil, false
	st.ran, st.replied = 0, false
	st.bodyOn = 0
	st.flags = ""
	clear(st.addResp)
	st.addResp = st.addResp[:0]
	clear(st.scratch)
	if f.chain != nil && len(f.chain.completers) > 0 {
		st.start = st.now()
	}
}

// epochSpan is how long a filterState derives start from one epoch.
const epochSpan = time.Second

// now is the time, from the epoch while it is recent (time.Since reads
// the monotonic clock only; time.Now reads both clocks).
func (st *filterState) now() time.Time {
	if !st.epoch.IsZero() {
		if d := time.Since(st.epoch); d >= 0 && d < epochSpan {
			return st.epoch.Add(d)
		}
	}
	st.epoch = time.Now()
	return st.epoch
}

// route is the route the request matches now (nil: none, or no table).
func (st *filterState) route() *route.Route {
	if !st.rtDone {
		st.rtDone = true
		if t := st.f.table(); t != nil {
			st.rt = t.Route(&st.rreq)
		}
	}
	return st.rt
}

// Route, ClearRoute, AddResponseHeader, AddResponseFlag and Scratch are
// httpfilter.Stream's, the same on every codec.
func (st *filterState) Route() httpfilter.Route {
	rt := st.route()
	if rt == nil {
		return nil
	}
	st.rview.rt = rt
	return &st.rview
}

func (st *filterState) ClearRoute() { st.rt, st.rtDone = nil, false }

func (st *filterState) AddResponseHeader(name, value string) {
	st.addResp = append(st.addResp, headerPair{name, value})
}

func (st *filterState) AddResponseFlag(flag string) {
	if st.flags == "" {
		st.flags = flag
		return
	}
	st.flags += "," + flag
}

func (st *filterState) Scratch(i int) *any {
	if n := len(st.f.chain.filters); len(st.scratch) < n {
		st.scratch = make([]any, n)
	}
	return &st.scratch[i]
}

// mergeFlags puts the filters' flags before a reply's own ("DI,UF").
func (st *filterState) mergeFlags(flags string) string {
	switch {
	case st.flags == "":
		return flags
	case flags == "":
		return st.flags
	}
	return st.flags + "," + flags
}

// decode runs the chain's decoders on s (whose filterState is st) and
// reports whether one stopped the request.
func (st *filterState) decode(s httpfilter.Stream) (stopped bool) {
	ch := st.f.chain
	if ch == nil {
		return false
	}
	for i, f := range ch.filters {
		if st.disabled(ch.names[i]) {
			continue
		}
		st.ran = i + 1
		if f.DecodeHeaders(s) == httpfilter.Stop {
			return true
		}
	}
	return ch.router != nil && ch.router.DecodeHeaders(s) == httpfilter.Stop
}

// disabled reports whether the route turns the filter named name off.
func (st *filterState) disabled(name string) bool {
	rt := st.route()
	if rt == nil || rt.Filters == nil || len(rt.Filters.PerFilter) == 0 {
		return false
	}
	_, off := rt.Filters.PerFilter[name].(httpfilter.DisabledConfig)
	return off
}

// encodeHeaders runs the encoders of the filters that ran on a response
// head, in reverse order. A filter's own local reply does not pass its
// encoder (it is not before itself).
func (st *filterState) encodeHeaders(s httpfilter.Stream, status int, h httpfilter.HeaderMap) {
	ch := st.f.chain
	if ch == nil {
		return
	}
	ran := st.ran
	if st.replied {
		ran-- // the filter that answered
	}
	for i := len(ch.encoders) - 1; i >= 0; i-- {
		if e := ch.encoders[i]; e.at < ran {
			e.f.EncodeHeaders(s, status, h)
		}
	}
}

// encodeHTTP readies a response head in net/http form: the fields filters
// set replace the upstream's (or a local reply's), the filters' response
// flags lead the reply's own, and the encoders of the filters that ran
// see the result. s is the Stream whose state st is.
func (st *filterState) encodeHTTP(s httpfilter.Stream, status int, h http.Header) {
	for _, p := range st.addResp {
		h.Set(p.name, p.value)
	}
	if st.flags != "" {
		if local := h.Get("X-Strait-Response-Flags"); local != "" {
			h.Set("X-Strait-Response-Flags", st.flags+","+local)
		} else {
			h.Set("X-Strait-Response-Flags", st.flags)
		}
	}
	if st.hasEncoders() {
		st.encodeHeaders(s, status, httpfilter.HTTPHeader(h))
	}
}

// encodeTrailers runs the trailers encoders of the filters that ran.
func (st *filterState) encodeTrailers(s httpfilter.Stream, h httpfilter.HeaderMap) {
	ch := st.f.chain
	if ch == nil {
		return
	}
	for i := len(ch.tencoders) - 1; i >= 0; i-- {
		if e := ch.tencoders[i]; e.at < st.ran {
			e.f.EncodeTrailers(s, h)
		}
	}
}

// complete tells every Completer of the chain that the stream ended.
func (st *filterState) complete(s httpfilter.Stream, info *httpfilter.StreamInfo) {
	ch := st.f.chain
	if ch == nil || len(ch.completers) == 0 {
		return
	}
	info.Start = st.start
	info.Duration = time.Since(st.start)
	info.Flags = st.mergeFlags(info.Flags)
	for _, c := range ch.completers {
		c.f.Complete(s, info)
	}
}

// hasEncoders reports whether a response head needs the chain at all.
func (st *filterState) hasEncoders() bool {
	return st.f.chain != nil && len(st.f.chain.encoders) > 0
}

// routeView is a route as filters see it (httpfilter.Route).
type routeView struct{ rt *route.Route }

func (v *routeView) Name() string              { return v.rt.Name }
func (v *routeView) Cluster() string           { return v.rt.Cluster }
func (v *routeView) Decorator() (string, bool) { return v.rt.Decorator, v.rt.DecoratorPropagate }
func (v *routeView) PerFilterConfig(filter string) any {
	return v.rt.Filters.PerFilterConfig(filter)
}

// connectionOf describes a downstream connection for filters; dst is its
// (original) destination.
func connectionOf(c net.Conn, dst netip.AddrPort) *httpfilter.Connection {
	rc := rbac.ConnectionOf(c, dst)
	out := &httpfilter.Connection{Source: rc.Source, Destination: dst, SNI: rc.SNI, Secure: rc.Secure, URISANs: rc.URISANs, DNSSANs: rc.DNSSANs, Subject: rc.Subject}
	if tc := tlsconf.Terminated(c); tc != nil {
		if pc := tc.ConnectionState().PeerCertificates; len(pc) > 0 {
			out.PeerCertificate = pc[0]
		}
	}
	if lc := tlsconf.LocalCertificate(c); lc != nil {
		for _, u := range lc.URIs {
			out.LocalURISANs = append(out.LocalURISANs, u.String())
		}
	}
	return out
}

var (
	_ httpfilter.Route = (*routeView)(nil)
)

// The downstream connection as the HTTP filters see it, computed once per
// connection (HTTP/2: when it is accepted; HTTP/1.1: at the first request
// that asks, h1stream.go).

// rbacConnection describes the downstream connection c for the RBAC
// filter (rbac.ConnectionOf looks through the HCM's own wrappers to the
// *tls.Conn the listener handed over); nil when f has no filter.
func rbacConnection(f *Filter, c net.Conn, dst netip.AddrPort) *rbac.Connection {
	if f.chain == nil || len(f.chain.filters) == 0 {
		return nil
	}
	return rbac.ConnectionOf(c, dst)
}

// filterConnection is connectionOf (chain.go) when f has a filter.
func filterConnection(f *Filter, c net.Conn, dst netip.AddrPort) *httpfilter.Connection {
	if f.chain == nil || len(f.chain.filters) == 0 {
		return nil
	}
	return connectionOf(c, dst)
}
