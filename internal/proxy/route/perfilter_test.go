package route

import (
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/httpfilter/cors"
	"github.com/straitmesh/strait/internal/proxy/httpfilter/fault"
)

// testParsers are the fault and CORS filters' per-route parsers (the
// registry, which would give them, imports this package's importers).
type testParsers struct{}

func (testParsers) PerRouteParser(name, _ string) httpfilter.PerRouteParser {
	switch name {
	case fault.Name:
		return fault.Factory{}
	case cors.Name:
		return cors.Factory{}
	}
	return nil
}
