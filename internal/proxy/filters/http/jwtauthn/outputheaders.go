package jwtauthn

import (
	"slices"
	"strings"
)

// WritesHeader reports whether a provider of f writes the request header
// name (any case) when its token verifies: its forward_payload_header or
// one of its claim_to_headers. An app trusts these as the filter's output,
// so the HCM keeps them out of request trailers (forward/trailers.go), where
// the filter never looks. It reads outputHeaders, the sorted, lower-case
// list StripOutputHeaders removes.
func (f *Filter) WritesHeader(name string) bool {
	_, found := slices.BinarySearch(f.outputHeaders, strings.ToLower(name))
	return found
}
