package tracing

import (
	"regexp"
	"testing"
)

var uuid4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestAppendRequestID: a version-4, variant-10 UUID appended after what
// w holds, with no allocation when w has room, and different each time;
// NewRequestID is the same as a string.
func TestAppendRequestID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		w := AppendRequestID([]byte("x-request-id: "))
		id, ok := string(w[len("x-request-id: "):]), string(w[:len("x-request-id: ")]) == "x-request-id: "
		if !ok || !uuid4.MatchString(id) {
			t.Fatalf("appended %q: want the prefix kept and a UUID4", w)
		}
		if seen[id] {
			t.Fatalf("%s twice", id)
		}
		seen[id] = true
		if s := NewRequestID(); !uuid4.MatchString(s) {
			t.Fatalf("NewRequestID() = %q, want a UUID4", s)
		}
	}
	buf := make([]byte, 0, uuidLength)
	if n := testing.AllocsPerRun(100, func() { buf = AppendRequestID(buf[:0]) }); n != 0 {
		t.Errorf("AppendRequestID into a buffer with room: %v allocs, want 0", n)
	}
}
