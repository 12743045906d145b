package grpctest

import "testing"

// TestDirect checks the service and CheckAll without a proxy in between.
func TestDirect(t *testing.T) {
	s, addr := Serve(t)
	CheckAll(t, Dial(t, addr), s)
}
