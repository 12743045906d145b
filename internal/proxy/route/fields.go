package route

import (
	"fmt"

	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// This file holds the allow-lists of the route sub-messages whose fields
// the compilers read through a oneof switch or getters (matchers, mirror
// and hash policies, data sources): a field outside the list is refused by
// name, so that one a newer Envoy API adds is NACKed rather than ignored.
// The top-level messages' lists (Route, RouteAction, VirtualHost, ...)
// are in action.go, RouteMatch's in match.go.

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
