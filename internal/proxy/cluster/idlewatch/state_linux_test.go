package idlewatch

import (
	"testing"
	"unsafe"
)

// TestConnLayout: a Conn is one cache line, State's fields first (Linux:
// elsewhere ReadMark has no epoch and nothing is watched).
func TestConnLayout(t *testing.T) {
	if n := unsafe.Sizeof(Conn{}); n != 64 {
		t.Errorf("Conn is %d bytes, want 64", n)
	}
	if StateBytes > 56 {
		t.Errorf("State reads %d leading bytes of a Conn", StateBytes)
	}
}
