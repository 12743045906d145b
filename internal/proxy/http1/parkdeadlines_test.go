package http1

import (
	"math/rand/v2"
	"testing"
)

// TestParkDeadlinesHeap drives the deadline heap through random pushes
// and removals (the first slot, the last, any between, slots not in it,
// equal deadlines): after each, every slot knows its index, each parent's
// deadline is at most its children's, first() has the earliest deadline,
// and push reports whether the slot it added became the first.
func TestParkDeadlinesHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h parkDeadlines
	in := map[*ParkSlot]bool{}
	check := func(op string) {
		t.Helper()
		if len(h) != len(in) {
			t.Fatalf("after %s: %d slots in the heap, want %d", op, len(h), len(in))
		}
		var min *ParkSlot
		for i, s := range h {
			if s.hidx != i || !in[s] {
				t.Fatalf("after %s: slot at %d has hidx %d (in: %v)", op, i, s.hidx, in[s])
			}
			if i > 0 && h[(i-1)/2].deadline > s.deadline {
				t.Fatalf("after %s: parent %d (deadline %d) after child %d (deadline %d)", op, (i-1)/2, h[(i-1)/2].deadline, i, s.deadline)
			}
			if min == nil || s.deadline < min.deadline {
				min = s
			}
		}
		if f := h.first(); f == nil && min != nil || f != nil && f.deadline != min.deadline {
			t.Fatalf("after %s: first() is not the earliest deadline", op)
		}
	}
	for step := range 3000 {
		if len(h) == 0 || rng.IntN(5) < 3 && len(h) < 64 {
			s := &ParkSlot{deadline: int64(rng.IntN(50)), hidx: -1}
			wasMin := h.first() == nil || s.deadline < h.first().deadline
			first := h.push(s)
			in[s] = true
			if first != (h[0] == s) {
				t.Fatalf("step %d: push reported first=%v, slot at index %d", step, first, s.hidx)
			}
			if wasMin && !first {
				t.Fatalf("step %d: a slot earlier than all was not made first", step)
			}
			check("push")
			continue
		}
		var s *ParkSlot
		switch rng.IntN(4) {
		case 0:
			s = h[0]
		case 1:
			s = h[len(h)-1]
		case 2:
			s = &ParkSlot{hidx: -1} // never pushed
		default:
			s = h[rng.IntN(len(h))]
		}
		h.remove(s)
		delete(in, s)
		if s.hidx != -1 {
			t.Fatalf("step %d: a removed slot has hidx %d", step, s.hidx)
		}
		check("remove")
		h.remove(s) // twice: nothing
		check("second remove")
	}
}
