package hcm

import (
	"net/http"
	"testing"
	"unsafe"
)

// TestGrowStack: a stream handler wrapped by withGrownStack runs on a
// stack that already has room for a deep call, so the call does not move
// the stack (which is what a growth does: the address of a local changes).
// Without the wrapper the new goroutine's small stack is copied.
func TestGrowStack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wrap  func(http.HandlerFunc) http.HandlerFunc
		moved bool
	}{
		{"grown", withGrownStack, false},
		{"plain", func(h http.HandlerFunc) http.HandlerFunc { return h }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan bool)
			h := tc.wrap(func(http.ResponseWriter, *http.Request) {
				var x int
				before := uintptr(unsafe.Pointer(&x))
				deepCall()
				done <- uintptr(unsafe.Pointer(&x)) != before
			})
			go h(nil, nil)
			if moved := <-done; moved != tc.moved {
				t.Errorf("stack moved during the deep call: %v, want %v", moved, tc.moved)
			}
		})
	}
}

// deepCall needs 8 KiB of stack beyond its caller's: more than a new
// goroutine starts with, less than withGrownStack leaves free.
//
//go:noinline
func deepCall() {
	var b [8 << 10]byte
	keepFrame(b[:])
}
