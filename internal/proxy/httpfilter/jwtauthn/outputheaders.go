package jwtauthn

import "strings"

// WritesHeader reports whether a provider of f writes the request header
// name (any case) when its token verifies: its forward_payload_header or
// one of its claim_to_headers. An app trusts these as the filter's output,
// so the HCM keeps them out of request trailers (hcm/trailers.go), where
// the filter never looks.
func (f *Filter) WritesHeader(name string) bool {
	for _, p := range f.providers {
		if p.payloadHeader != "" && strings.EqualFold(p.payloadHeader, name) {
			return true
		}
		for _, c := range p.claimHeaders {
			if strings.EqualFold(c.header, name) {
				return true
			}
		}
	}
	return false
}
