package route

import (
	"fmt"

	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// This file is the route table's field audit: the allow-lists of the
// messages Compile and the compilers it calls read. A
// field outside its message's list, or one a newer Envoy API adds, is
// refused by name (fieldaudit.Only), so that it is NACKed rather than
// ignored. fields_test.go checks that each list names only real fields,
// and that the lists of the messages compiled through a oneof switch
// cover every field.

// Fields implemented, per message; any other populated field is refused.
var (
	routeFields = map[protoreflect.Name]bool{
		"name": true, "match": true, "route": true, "redirect": true, "direct_response": true,
		"request_headers_to_add": true, "request_headers_to_remove": true,
		"response_headers_to_add": true, "response_headers_to_remove": true,
		// decorator names the tracing span (Route.Decorator); metadata
		// carries no behaviour of its own.
		"decorator": true, "metadata": true,
		// typed_per_filter_config belongs to the HTTP filters, which
		// validate their own entries.
		"typed_per_filter_config": true,
	}
	// routeActionFields: request_mirror_policies are compiled with the
	// route's filters (filters.go), hash_policy in hashpolicy.go.
	routeActionFields = map[protoreflect.Name]bool{
		"cluster": true, "weighted_clusters": true, "timeout": true, "idle_timeout": true,
		"retry_policy": true, "prefix_rewrite": true, "regex_rewrite": true,
		"host_rewrite_literal": true, "max_grpc_timeout": true, "request_mirror_policies": true,
		"hash_policy": true,
	}
	redirectFields = map[protoreflect.Name]bool{
		"scheme_redirect": true, "https_redirect": true, "host_redirect": true, "port_redirect": true,
		"path_redirect": true, "prefix_rewrite": true, "response_code": true, "strip_query": true,
	}
	weightedClustersFields = map[protoreflect.Name]bool{"clusters": true, "total_weight": true}
	clusterWeightFields    = map[protoreflect.Name]bool{
		"name": true, "weight": true, "host_rewrite_literal": true,
		"request_headers_to_add": true, "request_headers_to_remove": true,
		"response_headers_to_add": true, "response_headers_to_remove": true,
	}
	directResponseFields = map[protoreflect.Name]bool{"status": true, "body": true}
	// virtualHostFields: a virtual host's own retry, hedge and mirror
	// policies, header mutations and the rest are refused until
	// implemented.
	virtualHostFields = map[protoreflect.Name]bool{
		"name": true, "domains": true, "routes": true, "include_request_attempt_count": true,
		"metadata": true, "typed_per_filter_config": true,
	}
)

// routeConfigurationFields are the RouteConfiguration fields strait-proxy
// honours; the rest (vhds, internal_only_headers, the header mutations of
// the whole table, most_specific_header_mutations_wins,
// cluster_specifier_plugins, request_mirror_policies, vhost_header,
// typed_per_filter_config, route_specifiers, and any field added later)
// are refused by name until implemented. validate_clusters is checked on
// its own: only false (no check, Envoy's default for RDS) is honoured.
var routeConfigurationFields = map[protoreflect.Name]bool{
	"name": true, "virtual_hosts": true, "metadata": true, "validate_clusters": true,
	"ignore_port_in_host_matching": true, "max_direct_response_body_size_bytes": true,
}

// implementedMatch are the RouteMatch fields compileMatch implements.
var implementedMatch = map[protoreflect.Name]bool{
	"prefix": true, "path": true, "safe_regex": true, "path_separated_prefix": true,
	"case_sensitive": true, "headers": true, "query_parameters": true, "grpc": true,
}

// The hash policy specifiers' fields (compileHashPolicy).
var (
	hashHeaderFields               = map[protoreflect.Name]bool{"header_name": true}
	hashCookieFields               = map[protoreflect.Name]bool{"name": true, "ttl": true, "path": true, "attributes": true}
	hashConnectionPropertiesFields = map[protoreflect.Name]bool{"source_ip": true}
	hashQueryParameterFields       = map[protoreflect.Name]bool{"name": true}
)

var (
	// headerMatcherFields: range_match is refused by compileHeader's
	// switch, with the specifiers it implements named.
	headerMatcherFields = map[protoreflect.Name]bool{
		"name": true, "exact_match": true, "safe_regex_match": true, "range_match": true,
		"present_match": true, "prefix_match": true, "suffix_match": true, "contains_match": true,
		"string_match": true, "invert_match": true, "treat_missing_header_as_empty": true,
	}
	queryParameterMatcherFields = map[protoreflect.Name]bool{"name": true, "string_match": true, "present_match": true}
	// stringMatcherFields: custom is refused by compileStringMatch's
	// switch.
	stringMatcherFields = map[protoreflect.Name]bool{
		"exact": true, "prefix": true, "suffix": true, "safe_regex": true, "contains": true,
		"custom": true, "ignore_case": true,
	}
	// regexMatcherFields: the regex, in RE2 syntax (Go's regexp). The
	// deprecated google_re2 engine choice is RE2 too, honoured when it
	// sets no max_program_size.
	regexMatcherFields = map[protoreflect.Name]bool{"regex": true, "google_re2": true}
	// mirrorPolicyFields: cluster_header, request_headers_mutations and
	// host_rewrite_literal are refused by compileFilters with their fix;
	// trace_sampled only decides the shadow's trace sampling, and strait
	// does not trace.
	mirrorPolicyFields = map[protoreflect.Name]bool{
		"cluster": true, "cluster_header": true, "runtime_fraction": true, "trace_sampled": true,
		"disable_shadow_host_suffix_append": true, "request_headers_mutations": true, "host_rewrite_literal": true,
	}
	// hashPolicyFields: filter_state is refused by compileHashPolicy's
	// switch.
	hashPolicyFields = map[protoreflect.Name]bool{
		"header": true, "cookie": true, "connection_properties": true, "query_parameter": true,
		"filter_state": true, "terminal": true,
	}
	// dataSourceFields: a direct response body is inline (filename and
	// environment_variable are refused by compileAction's switch; a
	// watched_directory only matters with filename).
	dataSourceFields = map[protoreflect.Name]bool{
		"inline_bytes": true, "inline_string": true, "filename": true, "environment_variable": true,
	}
)

// checkRegex refuses the RegexMatcher fields compileRegex does not honour.
func checkRegex(field string, r *matcherv3.RegexMatcher) error {
	if err := fieldaudit.Only(field, r.ProtoReflect(), regexMatcherFields); err != nil {
		return err
	}
	//nolint:staticcheck // the deprecated engine field, still accepted by Envoy
	if g := r.GetGoogleRe2(); g != nil {
		if err := fieldaudit.Only(field+".google_re2", g.ProtoReflect(), nil); err != nil {
			return fmt.Errorf("%w (Go's regexp has no program size limit; remove it)", err)
		}
	}
	return nil
}
