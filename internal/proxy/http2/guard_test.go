package http2

import "testing"

// TestPrematureResetsTooMany: Envoy's rule (half of the first 500
// streams, then half of all) and Strait's floor (20 premature resets that
// are at least half of the ended streams); a client that resets a
// minority of its streams is never closed.
func TestPrematureResetsTooMany(t *testing.T) {
	for _, tc := range []struct {
		premature, closed int
		want              bool
	}{
		{0, 0, false},
		{19, 19, false},   // under the floor
		{20, 20, true},    // the floor, all premature
		{20, 40, true},    // the floor, exactly half
		{20, 41, false},   // the floor, under half
		{249, 499, false}, // Envoy: under 250 in the first 500
		{250, 600, false}, // Envoy after 500: under half
		{300, 600, true},  // Envoy after 500: half
		{100, 1000, false},
		{249, 400, true}, // the floor with over half
	} {
		if got := prematureResetsTooMany(tc.premature, tc.closed); got != tc.want {
			t.Errorf("prematureResetsTooMany(%d, %d) = %v, want %v", tc.premature, tc.closed, got, tc.want)
		}
	}
}
