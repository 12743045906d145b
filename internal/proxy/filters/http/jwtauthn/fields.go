package jwtauthn

import "google.golang.org/protobuf/reflect/protoreflect"

// The jwt_authn filter's field audit: each field of JwtAuthentication and
// JwtProvider is honoured (read by Build or buildProvider) or refused with
// the fix. JwtRequirement and RequirementRule are oneofs, refused by their
// switches when a kind is not implemented.
var (
	jwtAuthenticationHonoured = map[protoreflect.Name]string{
		"providers": "buildProvider", "rules": "Build", "requirement_map": "Build",
		"bypass_cors_preflight": "Build",
	}
	jwtAuthenticationRefused = map[protoreflect.Name]string{
		"filter_state_rules":     "use rules",
		"strip_failure_response": "leave it false",
		"stat_prefix":            "leave it empty",
	}
	jwtProviderHonoured = map[protoreflect.Name]string{
		"issuer": "buildProvider", "audiences": "buildProvider", "local_jwks": "buildProvider",
		"remote_jwks": "refused by buildProvider with its fix", "forward": "buildProvider",
		"from_headers": "buildProvider", "from_params": "buildProvider", "from_cookies": "buildProvider",
		"forward_payload_header": "buildProvider", "pad_forward_payload_header": "buildProvider",
		"payload_in_metadata": "buildProvider", "normalize_payload_in_metadata": "buildProvider",
		"clock_skew_seconds": "buildProvider", "claim_to_headers": "buildProvider",
	}
	jwtProviderRefused = map[protoreflect.Name]string{
		"subjects":                  "leave it unset",
		"require_expiration":        "leave it false",
		"max_lifetime":              "leave it unset",
		"header_in_metadata":        "leave it empty",
		"failed_status_in_metadata": "leave it empty",
		"jwt_cache_config":          "leave it unset",
		"clear_route_cache":         "leave it false: the route is chosen once",
	}
	// normalizePayloadFields, jwtHeaderFields and claimToHeaderFields are
	// read in full by buildProvider (claim_path refused with its fix).
	normalizePayloadFields = map[protoreflect.Name]string{"space_delimited_claims": "buildProvider"}
	jwtHeaderFields        = map[protoreflect.Name]string{"name": "buildProvider", "value_prefix": "buildProvider"}
	claimToHeaderFields    = map[protoreflect.Name]string{"header_name": "buildProvider", "claim_name": "buildProvider", "claim_path": "refused by buildProvider"}
)
