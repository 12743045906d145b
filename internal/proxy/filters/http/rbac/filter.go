package rbac

// The RBAC filter behind the HTTP filter interface (httpfilter.Factory).
// It reads the connection (peer certificate, addresses, SNI), the request
// head and the dynamic metadata the filters before it wrote (jwt_authn);
// the first RBAC filter of the chain that denies answers 403 "RBAC: access
// denied" with response flag RBAC. Per-route config (RBACPerRoute) is not
// implemented: refused, except FilterConfig{disabled: true}.

import (
	"net/netip"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/rbac"
	"github.com/straitmesh/strait/internal/proxy/route"
)

// TypeURL is the type of the filter's typed_config.
const TypeURL = "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC"

// InputSource is a Stream that has the engine's input ready: the HCM's
// streams fill one per request from what routing reads (route.Request),
// so that a check allocates nothing. A Stream without it gets an Input
// built from its methods.
type InputSource interface {
	RBACInput() *rbac.Input
}

// Factory builds the RBAC filter.
type Factory struct{}

// Names are the filter's name and its config's type URL.
func (Factory) Names() []string { return []string{Name, TypeURL} }

// Build compiles the filter's RBAC config.
func (Factory) Build(typed *anypb.Any, ctx httpfilter.BuildContext) (httpfilter.Filter, error) {
	r, err := Parse(typed)
	if err != nil {
		return nil, err
	}
	if ctx.Stats != nil {
		r.UseStats(ctx.Stats, ctx.StatPrefix)
	}
	return &Filter{rbac: r}, nil
}

// Filter is one configured RBAC filter. Immutable.
type Filter struct {
	rbac *rbac.Filter
}

// Name is the filter's name.
func (f *Filter) Name() string { return Name }

// DecodeHeaders checks the request against the rules (and the shadow
// rules, which only count).
func (f *Filter) DecodeHeaders(s httpfilter.Stream) httpfilter.Status {
	var in *rbac.Input
	if src, ok := s.(InputSource); ok {
		in = src.RBACInput()
	} else {
		in = inputOf(s)
	}
	if f.rbac.Check(in) {
		return httpfilter.Continue
	}
	s.LocalReply(403, -1, rbac.DeniedBody, rbac.ResponseFlag, nil)
	return httpfilter.Stop
}

// inputOf builds the engine's input from a Stream's methods.
func inputOf(s httpfilter.Stream) *rbac.Input {
	c := s.Connection()
	conn := &rbac.Connection{}
	if c != nil {
		conn = &rbac.Connection{Source: c.Source, Destination: c.Destination, SNI: c.SNI, Secure: c.Secure, URISANs: c.URISANs, DNSSANs: c.DNSSANs, Subject: c.Subject}
	}
	var remote netip.Addr
	if a := s.RemoteAddr(); a.IsValid() {
		remote = a
	}
	in := &rbac.Input{
		Conn: conn,
		Request: &route.Request{
			Host: s.Host(), Path: s.Path(), Query: s.Query(), Method: s.Method(), Scheme: s.Scheme(),
			Headers: s.RequestHeaders(),
		},
		RemoteIP: remote,
	}
	if md := s.Metadata(); md != nil {
		in.Metadata = md // a nil *httpfilter.Metadata stays a nil rbac.Metadata
	}
	return in
}

var (
	_ httpfilter.Factory = Factory{}
	_ httpfilter.Filter  = (*Filter)(nil)
)
