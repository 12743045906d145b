package rbac

import "google.golang.org/protobuf/reflect/protoreflect"

// The RBAC config's field audit: each field honoured (read by
// rbac.NewFilter) or refused with the fix.
var (
	rbacHonoured = map[protoreflect.Name]string{
		"rules": "rbac.NewFilter", "shadow_rules": "rbac.NewFilter",
		"rules_stat_prefix": "rbac.NewFilter", "shadow_rules_stat_prefix": "rbac.NewFilter",
	}
	rbacRefused = map[protoreflect.Name]string{
		"matcher":              "use rules",
		"shadow_matcher":       "use shadow_rules",
		"track_per_rule_stats": "remove it",
	}
)
