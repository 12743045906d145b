package gen

import (
	"fmt"
	"slices"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// parseRetryOn keeps Envoy conditions in order, takes HTTP status codes
// out of them, and skips empty items.
func TestParseRetryOn(t *testing.T) {
	for _, tc := range []struct {
		in, conds string
		codes     []uint32
	}{
		{"5xx", "5xx", nil},
		{"5xx, ,503,gateway-error,", "5xx,gateway-error", []uint32{503}},
		{"", "", nil},
		{"599,reset", "599,reset", nil}, // 599 is no status net/http names: a condition, as Istio treats it
		{"429,503", "", []uint32{429, 503}},
	} {
		conds, codes := parseRetryOn(tc.in)
		if conds != tc.conds || !slices.Equal(codes, tc.codes) {
			t.Errorf("parseRetryOn(%q) = %q %v, want %q %v", tc.in, conds, codes, tc.conds, tc.codes)
		}
	}
}

// headerValues sorts the options by name, leaves Host and pseudo-headers
// out (returning the authority), and appends or overwrites as asked.
func TestHeaderValues(t *testing.T) {
	m := map[string]string{"x-c": "3", "x-a": "1", ":path": "/p", "Host": "h.example", "x-b": "2"}
	for _, appendValue := range []bool{false, true} {
		opts, authority := headerValues(m, appendValue)
		want := core.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
		if appendValue {
			want = core.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD
		}
		var got []string
		for _, o := range opts {
			if o.GetAppendAction() != want {
				t.Errorf("append %v: %s has %v, want %v", appendValue, o.GetHeader().GetKey(), o.GetAppendAction(), want)
			}
			got = append(got, fmt.Sprintf("%s=%s", o.GetHeader().GetKey(), o.GetHeader().GetValue()))
		}
		if !slices.Equal(got, []string{"x-a=1", "x-b=2", "x-c=3"}) || authority != "h.example" {
			t.Errorf("append %v: %v authority %q, want [x-a=1 x-b=2 x-c=3] authority h.example", appendValue, got, authority)
		}
	}
}

// cidrRanges takes CIDRs and bare addresses (as a /32 or /128) and skips
// what is neither.
func TestCIDRRanges(t *testing.T) {
	var got []string
	for _, r := range cidrRanges([]string{"10.0.0.0/8", "bogus", "10.1.2.3", "fd00::1"}) {
		got = append(got, fmt.Sprintf("%s/%d", r.GetAddressPrefix(), r.GetPrefixLen().GetValue()))
	}
	if want := []string{"10.0.0.0/8", "10.1.2.3/32", "fd00::1/128"}; !slices.Equal(got, want) {
		t.Errorf("cidrRanges = %v, want %v", got, want)
	}
}
