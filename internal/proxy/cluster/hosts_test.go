package cluster

import (
	"testing"
	"unsafe"
)

// A host fits the 128-byte size class: a sidecar's configuration of
// 1,000 services holds 10,000 of them (bench/sidecar), and declaration
// order put it at 136 bytes, allocated as 144.
func TestHostSize(t *testing.T) {
	if n := unsafe.Sizeof(host{}); n > 128 {
		t.Errorf("host is %d bytes, want ≤ 128", n)
	}
}
