package buffer

// The buffer filter behind the HTTP filter interface (httpfilter.Factory,
// httpfilter.BodyDecoder): it asks the HCM for every request body whole,
// with its max_request_bytes as the buffer limit; the HCM answers 413
// past it and sends the rest upstream once read.

import (
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// Factory builds the buffer filter.
type Factory struct{}

// Names are the filter's name and its config's type URL.
func (Factory) Names() []string { return []string{Name, TypeURL} }

// Build reads the filter's Buffer.
func (Factory) Build(typed *anypb.Any, _ httpfilter.BuildContext) (httpfilter.Filter, error) {
	s, err := Parse(typed)
	if err != nil {
		return nil, err
	}
	return &Filter{def: s}, nil
}

// ParsePerRoute compiles a route's BufferPerRoute.
func (Factory) ParsePerRoute(typed *anypb.Any) (any, error) { return ParsePerRoute(typed) }

// MergePerRoute makes the route's config replace its virtual host's.
func (Factory) MergePerRoute(outer, inner any) any {
	if inner != nil {
		return inner
	}
	return outer
}

// Filter is the configured buffer filter. Immutable.
type Filter struct {
	def *Settings
}

// Name is the filter's name.
func (f *Filter) Name() string { return Name }

// DecodeHeaders lets the request through: the HCM reads its body for
// DecodesBody after every filter's DecodeHeaders, and the router sends it
// once read.
func (f *Filter) DecodeHeaders(httpfilter.Stream) httpfilter.Status { return httpfilter.Continue }

// DecodesBody asks for the request's body whole, up to the route's
// max_request_bytes, else the filter's.
func (f *Filter) DecodesBody(s httpfilter.Stream) (limit int64, decodes bool) {
	set := f.def
	if rt := s.Route(); rt != nil {
		if rs, ok := rt.PerFilterConfig(Name).(*Settings); ok {
			set = rs
		}
	}
	return set.MaxRequestBytes, true
}

// DecodeData lets every chunk through: the HCM keeps them until the
// body's end.
func (f *Filter) DecodeData(httpfilter.Stream, []byte, bool) httpfilter.Status {
	return httpfilter.Continue
}

var (
	_ httpfilter.Factory        = Factory{}
	_ httpfilter.PerRouteParser = Factory{}
	_ httpfilter.BodyDecoder    = (*Filter)(nil)
)
