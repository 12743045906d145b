// Package registry holds the HTTP filters strait-proxy runs, by the names
// and type URLs Envoy registers them under (Istio's filter names and type
// URLs are the contract). The HCM builds its chain from it, and route
// tables parse typed_per_filter_config with its per-route parsers. Adding
// a filter is one line in Default.
package registry

import (
	"fmt"

	"github.com/straitmesh/strait/internal/proxy/filters/http/buffer"
	"github.com/straitmesh/strait/internal/proxy/filters/http/cors"
	"github.com/straitmesh/strait/internal/proxy/filters/http/fault"
	"github.com/straitmesh/strait/internal/proxy/filters/http/istiostats"
	"github.com/straitmesh/strait/internal/proxy/filters/http/jwtauthn"
	"github.com/straitmesh/strait/internal/proxy/filters/http/metadataexchange"
	"github.com/straitmesh/strait/internal/proxy/filters/http/rbac"
	"github.com/straitmesh/strait/internal/proxy/filters/http/router"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// Registry maps filter names and type URLs to factories. Immutable once
// New returns; safe for concurrent use.
type Registry struct {
	byName map[string]httpfilter.Factory
}

// Default is the registry of the filters strait-proxy runs.
func Default() *Registry {
	r, err := New(
		jwtauthn.Factory{},
		rbac.Factory{},
		fault.Factory{},
		cors.Factory{},
		buffer.Factory{},
		metadataexchange.Factory{},
		istiostats.Factory{},
		router.Factory{}, // the terminal filter, last of every list
	)
	if err != nil {
		panic(err) // a programming error: two filters claim one name
	}
	return r
}

// New registers factories under their Names; a name claimed twice is an
// error.
func New(factories ...httpfilter.Factory) (*Registry, error) {
	r := &Registry{byName: map[string]httpfilter.Factory{}}
	for _, f := range factories {
		for _, n := range f.Names() {
			if _, dup := r.byName[n]; dup {
				return nil, fmt.Errorf("http filter %q is registered twice", n)
			}
			r.byName[n] = f
		}
	}
	return r, nil
}

// Factory returns the factory for an http_filters entry: by its name
// when that is registered (its Build then refuses a typed_config of
// another type, naming it), else by the type URL of its typed_config, as
// Envoy finds a filter by its config's type.
func (r *Registry) Factory(name, typeURL string) (httpfilter.Factory, bool) {
	if r == nil {
		return nil, false
	}
	if f, ok := r.byName[name]; ok {
		return f, true
	}
	if typeURL == "" {
		return nil, false
	}
	f, ok := r.byName[typeURL]
	return f, ok
}

// PerRouteParser returns the per-route config parser of the filter a
// typed_per_filter_config entry names by its key; nil when there is no
// such filter or it takes no per-route config. The key alone decides:
// filters read their per-route config under their registered name, so a
// config under another key would be read by none.
func (r *Registry) PerRouteParser(name, _ string) httpfilter.PerRouteParser {
	if r == nil {
		return nil
	}
	p, _ := r.byName[name].(httpfilter.PerRouteParser)
	return p
}
