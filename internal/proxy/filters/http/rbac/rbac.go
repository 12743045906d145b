// Package rbac is the envoy.filters.http.rbac HTTP filter: the RBAC engine
// (internal/proxy/rbac) run on each request, before routing. A denied
// request is answered 403 "RBAC: access denied".
package rbac

import (
	"fmt"

	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"github.com/straitmesh/strait/internal/proxy/rbac"
)

// Name is the filter name Envoy registers.
const Name = "envoy.filters.http.rbac"

// Parse reads the filter's typed config, refusing the fields it does not
// implement by name.
func Parse(a *anypb.Any) (*rbac.Filter, error) {
	if a == nil {
		return nil, fmt.Errorf("typed_config is required")
	}
	var cfg rbachttpv3.RBAC
	if err := a.UnmarshalTo(&cfg); err != nil {
		return nil, fmt.Errorf("typed_config: %w", err)
	}
	if err := fieldaudit.Check("", cfg.ProtoReflect(), rbacHonoured, rbacRefused); err != nil {
		return nil, err
	}
	return rbac.NewFilter(cfg.GetRules(), cfg.GetShadowRules(), cfg.GetRulesStatPrefix(), cfg.GetShadowRulesStatPrefix())
}
