package http1

import (
	"strings"
	"testing"
)

// Giving the read buffer back while idle and taking one again costs no
// allocation: the upstream pool does it on every request
// (BenchmarkProxy's 0 allocs/op).
func TestParkBufferNoAlloc(t *testing.T) {
	r := NewReader(strings.NewReader(""))
	defer r.Release()
	if n := testing.AllocsPerRun(100, func() {
		if !r.ParkBuffer() {
			t.Fatal("ParkBuffer kept the buffer of an empty reader")
		}
		r.UnparkBuffer()
	}); n != 0 {
		t.Errorf("ParkBuffer+UnparkBuffer: %v allocs, want 0", n)
	}
	if len(r.buf) != DefaultBufferSize {
		t.Errorf("buffer of %d bytes after UnparkBuffer, want %d", len(r.buf), DefaultBufferSize)
	}
}
