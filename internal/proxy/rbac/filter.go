package rbac

import (
	"fmt"
	"sync/atomic"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	netrbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// NetworkName is the network filter's name.
const NetworkName = "envoy.filters.network.rbac"

// DeniedBody is the body of the HTTP filter's 403, as Envoy's.
const DeniedBody = "RBAC: access denied"

// ResponseFlag marks a request the filter denied (Envoy's "RBAC").
const ResponseFlag = "RBAC"

// MetadataNamespace is where the filters write their shadow results in a
// request's dynamic metadata (Envoy's HTTP filter name).
const MetadataNamespace = "envoy.filters.http.rbac"

// Filter is an enforcing engine and a shadow (dry-run) engine, either of
// which may be absent, with their counters. Immutable once built; the
// counters are atomic.
type Filter struct {
	rules, shadow *Engine
	// Prefixes of the counter names (rules_stat_prefix,
	// shadow_rules_stat_prefix) and of the shadow metadata keys.
	rulesPrefix, shadowPrefix string
	st                        counters
}

type counters struct {
	allowed, denied, shadowAllowed, shadowDenied *atomic.Uint64
}

func inc(c *atomic.Uint64) {
	if c != nil {
		c.Add(1)
	}
}

// NewFilter compiles the enforcing and shadow rules (either may be nil).
func NewFilter(rules, shadow *rbacv3.RBAC, rulesPrefix, shadowPrefix string) (*Filter, error) {
	f := &Filter{rulesPrefix: rulesPrefix, shadowPrefix: shadowPrefix}
	if rules != nil {
		e, err := Compile("rules", rules)
		if err != nil {
			return nil, err
		}
		f.rules = e
	}
	if shadow != nil {
		e, err := Compile("shadow_rules", shadow)
		if err != nil {
			return nil, err
		}
		f.shadow = e
	}
	return f, nil
}

// UseStats gives the filter its counters under prefix (which ends in "."),
// with Envoy's names: PREFIX rbac.RULES_PREFIX allowed / denied and
// PREFIX rbac.SHADOW_PREFIX shadow_allowed / shadow_denied. Call it
// before the filter is used.
func (f *Filter) UseStats(st *stats.Store, prefix string) {
	if st == nil {
		return
	}
	p := prefix + "rbac."
	f.st = counters{
		allowed:       st.Counter(p + f.rulesPrefix + "allowed"),
		denied:        st.Counter(p + f.rulesPrefix + "denied"),
		shadowAllowed: st.Counter(p + f.shadowPrefix + "shadow_allowed"),
		shadowDenied:  st.Counter(p + f.shadowPrefix + "shadow_denied"),
	}
}

// Check evaluates in: the shadow rules first (counted, and their result
// written into in.Metadata when it is not nil, never enforced), then the
// rules. It reports whether the request or connection may go on.
func (f *Filter) Check(in *Input) bool {
	ok, _ := f.CheckPolicy(in)
	return ok
}

// CheckPolicy is Check that also returns the rules' effective policy id:
// the policy that matched (empty: none), which Envoy's network filter
// puts in the connection's termination details when it denies.
func (f *Filter) CheckPolicy(in *Input) (bool, string) {
	if f.shadow != nil {
		ok, id := f.shadow.Evaluate(in)
		result := "allowed"
		if ok {
			inc(f.st.shadowAllowed)
		} else {
			inc(f.st.shadowDenied)
			result = "denied"
		}
		if in.Metadata != nil {
			if id != "" {
				in.Metadata.Set(MetadataNamespace, f.shadowPrefix+"shadow_effective_policy_id", id)
			}
			in.Metadata.Set(MetadataNamespace, f.shadowPrefix+"shadow_engine_result", result)
		}
	}
	if f.rules == nil {
		return true, ""
	}
	ok, id := f.rules.Evaluate(in)
	if ok {
		inc(f.st.allowed)
	} else {
		inc(f.st.denied)
	}
	return ok, id
}

// ParseNetwork reads an envoy.filters.network.rbac typed config. The
// filter is evaluated once, when the connection is handed to the chain's
// filters (after TLS): Envoy's default ONE_TIME_ON_FIRST_BYTE waits for
// the client's first byte, which changes nothing for the decision (no
// network-level input arrives with it) but would let a server-first
// upstream speak to a denied client; deciding earlier is the stricter
// reading. CONTINUOUS is refused.
func ParseNetwork(a *anypb.Any) (*Filter, string, error) {
	var cfg netrbacv3.RBAC
	if err := a.UnmarshalTo(&cfg); err != nil {
		return nil, "", fmt.Errorf("typed_config: %w", err)
	}
	switch {
	case cfg.GetStatPrefix() == "":
		return nil, "", fmt.Errorf("stat_prefix must be set")
	case cfg.GetMatcher() != nil:
		return nil, "", fmt.Errorf("matcher is not supported (use rules)")
	case cfg.GetShadowMatcher() != nil:
		return nil, "", fmt.Errorf("shadow_matcher is not supported (use shadow_rules)")
	case cfg.GetEnforcementType() != netrbacv3.RBAC_ONE_TIME_ON_FIRST_BYTE:
		return nil, "", fmt.Errorf("enforcement_type %v is not supported (only ONE_TIME_ON_FIRST_BYTE)", cfg.GetEnforcementType())
	case cfg.GetDelayDeny() != nil:
		return nil, "", fmt.Errorf("delay_deny is not supported (remove it)")
	}
	f, err := NewFilter(cfg.GetRules(), cfg.GetShadowRules(), "", cfg.GetShadowRulesStatPrefix())
	if err != nil {
		return nil, "", err
	}
	return f, cfg.GetStatPrefix(), nil
}
