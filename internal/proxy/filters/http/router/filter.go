// Package router is envoy.filters.http.router behind the HTTP filter
// interface: the terminal filter that ends every HCM's http_filters list.
// Its Factory audits the Router typed_config field by field (fields.go):
// Strait's router is configured by the routes alone, so Istio's default
// Router{} is what it does and every field set is refused by name.
//
// The filter's DecodeHeaders continues: the chain has run every decoder
// before it, and the codec (package hcm) then carries out the route's
// upstream exchange with package forward, as the route and package
// router (internal/proxy/router, the decisions) say. The exchange itself
// is not behind this interface yet.
package router

import (
	"fmt"

	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// Name is the HTTP filter name.
const Name = "envoy.filters.http.router"

// TypeURL is the type of the filter's typed_config.
const TypeURL = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"

// Factory builds the router filter.
type Factory struct{}

// Names are the filter's name and its config's type URL.
func (Factory) Names() []string { return []string{Name, TypeURL} }

// Build audits the Router config (nil typed: Router{}); a field set that
// Strait's router does not honour is an error naming it.
func (Factory) Build(typed *anypb.Any, _ httpfilter.BuildContext) (httpfilter.Filter, error) {
	if typed != nil {
		var r routerv3.Router
		if err := typed.UnmarshalTo(&r); err != nil {
			return nil, fmt.Errorf("typed_config %s is not envoy.extensions.filters.http.router.v3.Router: %w", typed.GetTypeUrl(), err)
		}
		if err := Check(&r); err != nil {
			return nil, err
		}
	}
	return Filter{}, nil
}

// Check refuses the first field of r that Strait's router does not
// honour, naming it (also one this build's API does not know).
func Check(r *routerv3.Router) error {
	return fieldaudit.Check("", r.ProtoReflect(), routerHonoured, routerRefused)
}

// Filter is the configured router. Immutable and empty: nothing of the
// Router config changes what it does.
type Filter struct{}

// Name is the filter's name.
func (Filter) Name() string { return Name }

// DecodeHeaders lets the request through to the upstream exchange, which
// the codec runs once the chain has (hcm: h1.go, h2.go).
func (Filter) DecodeHeaders(httpfilter.Stream) httpfilter.Status { return httpfilter.Continue }

// Terminal marks the router as the filter that ends the chain.
func (Filter) Terminal() {}

var (
	_ httpfilter.Factory  = Factory{}
	_ httpfilter.Terminal = Filter{}
)
