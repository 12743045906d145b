package wire

import "testing"

func TestBodyBuf(t *testing.T) {
	for _, c := range []struct {
		n      int
		pooled bool
	}{
		{0, true}, {1, true}, {BodyBufSize, true}, {BodyBufSize + 1, false}, {1 << 20, false},
	} {
		b := GetBodyBuf(c.n)
		if len(b) != 0 || cap(b) < c.n {
			t.Fatalf("GetBodyBuf(%d): len %d cap %d", c.n, len(b), cap(b))
		}
		if got := cap(b) == BodyBufSize; got != c.pooled {
			t.Fatalf("GetBodyBuf(%d): cap %d, pooled %v, want %v", c.n, cap(b), got, c.pooled)
		}
		PutBodyBuf(b)
	}
}

// TestBodyBufReused: a Get after a Put takes the buffer given back, and
// neither allocates (AllocsPerRun's whole-number average: the race
// detector's pool drops a Put now and then).
func TestBodyBufReused(t *testing.T) {
	b := GetBodyBuf(10)
	b = append(b, "abc"...)
	PutBodyBuf(b)
	for _, n := range []int{0, 100, BodyBufSize} {
		if allocs := testing.AllocsPerRun(100, func() { PutBodyBuf(GetBodyBuf(n)) }); allocs != 0 {
			t.Fatalf("GetBodyBuf(%d): %v allocations per Get and Put, want 0", n, allocs)
		}
	}
	grown := append(GetBodyBuf(0), make([]byte, BodyBufSize+1)...)
	PutBodyBuf(grown) // not pooled: a later Get must still be BodyBufSize
	if b := GetBodyBuf(1); cap(b) != BodyBufSize {
		t.Fatalf("after a grown buffer was given back: cap %d", cap(b))
	}
}
