package cluster

import (
	"testing"
	"unsafe"

	"github.com/straitmesh/strait/internal/proxy/cluster/idlewatch"
)

// TestUpstreamConnLayout: what usable reads of an idle connection (its
// idle times and its idle watch state) is in the first 64 bytes, and the
// struct's size is a multiple of 64, so that its allocations are aligned
// to a cache line and taking a cold connection costs one line for it
// (Linux, where the idle watch exists and the padding is for).
func TestUpstreamConnLayout(t *testing.T) {
	var u UpstreamConn
	if n := unsafe.Sizeof(u); n%64 != 0 {
		t.Errorf("UpstreamConn is %d bytes, not a multiple of 64: change upstreamConnPad by %d", n, 64-n%64)
	}
	if end := unsafe.Offsetof(u.w) + idlewatch.StateBytes; unsafe.Offsetof(u.idleSince) >= 64 ||
		unsafe.Offsetof(u.expires) >= 64 || end > 64 {
		t.Errorf("idleSince at %d, expires at %d, the watch state ends at %d: not all in the first 64 bytes",
			unsafe.Offsetof(u.idleSince), unsafe.Offsetof(u.expires), end)
	}
}
