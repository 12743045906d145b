package idlewatch

import (
	"sync/atomic"
	"testing"

	"github.com/straitmesh/strait/internal/proxy/http1"
)

// TestWatchState: the idle watch's verdict from the epoch of its last
// collection that found the socket readable (heard) and the epochs around
// the last read that emptied the socket (d0, d1; odd: a collection ran).
func TestWatchState(t *testing.T) {
	for _, tc := range []struct {
		name          string
		drained       bool
		stopped       bool
		heard, d0, d1 uint64
		want          State
	}{
		{"never heard", true, false, 0, 2, 2, Clean},
		{"heard before the read", true, false, 5, 6, 6, Clean},
		{"heard after the read", true, false, 9, 6, 8, Dirty},
		{"collection during the read", true, false, 7, 6, 8, Unsure},
		{"read during a collection", true, false, 7, 7, 7, Unsure},
		{"collection began as the read began", true, false, 7, 7, 8, Unsure},
		{"last read filled the buffer", false, false, 0, 2, 2, Unsure},
		{"watch stopped", true, true, 0, 2, 2, Unsure},
	} {
		var stopped atomic.Bool
		stopped.Store(tc.stopped)
		w := &Conn{stopped: &stopped, mark: http1.ReadMark{Drained: tc.drained, D0: tc.d0, D1: tc.d1}}
		w.heard.Store(tc.heard)
		if got := w.State(); got != tc.want {
			t.Errorf("%s: state %d, want %d", tc.name, got, tc.want)
		}
	}
}
