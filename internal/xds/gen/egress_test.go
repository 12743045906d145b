package gen

import (
	"slices"
	"testing"

	"github.com/straitmesh/strait/internal/mesh"
)

// listenAddresses: a service's IP addresses; 0.0.0.0 when it has none at
// all, nothing when it has only CIDRs.
func TestListenAddresses(t *testing.T) {
	for _, tc := range []struct {
		addrs, want []string
	}{
		{nil, []string{"0.0.0.0"}},
		{[]string{"10.1.0.0/16"}, nil},
		{[]string{"10.0.0.1", "10.1.0.0/16", "fd00::1"}, []string{"10.0.0.1", "fd00::1"}},
	} {
		if got := listenAddresses(&mesh.Service{Addresses: tc.addrs}); !slices.Equal(got, tc.want) {
			t.Errorf("listenAddresses(%q) = %q, want %q", tc.addrs, got, tc.want)
		}
	}
}
