package cors

import "google.golang.org/protobuf/reflect/protoreflect"

// corsPolicyHonoured are the CorsPolicy fields Build reads: all of
// today's; one a newer API adds is refused until implemented.
var corsPolicyHonoured = map[protoreflect.Name]string{
	"allow_origin_string_match": "Build", "allow_methods": "Build", "allow_headers": "Build",
	"expose_headers": "Build", "max_age": "Build", "allow_credentials": "Build",
	"filter_enabled": "Build", "shadow_enabled": "Build (counts only)",
	"allow_private_network_access": "Build", "forward_not_matching_preflights": "Build",
}
