package http1

// parkDeadlines is a Parker's parked connections that have a deadline,
// in a min-heap by deadline, so that one timer serves them all: a
// time.Timer of each would cost more than the rest of what a parked
// connection keeps. Guarded by the Parker's mu.
type parkDeadlines []*ParkSlot

// push adds s (its deadline set); it reports whether s is now the first.
func (h *parkDeadlines) push(s *ParkSlot) bool {
	s.hidx = len(*h)
	*h = append(*h, s)
	h.up(s.hidx)
	return s.hidx == 0
}

// remove takes s out, if it is in.
func (h *parkDeadlines) remove(s *ParkSlot) {
	i := s.hidx
	if i < 0 || i >= len(*h) || (*h)[i] != s {
		return
	}
	last := len(*h) - 1
	h.swap(i, last)
	(*h)[last] = nil
	*h = (*h)[:last]
	s.hidx = -1
	if i < last {
		h.down(i)
		h.up(i)
	}
}

// first returns the slot with the earliest deadline; nil for none.
func (h parkDeadlines) first() *ParkSlot {
	if len(h) == 0 {
		return nil
	}
	return h[0]
}

func (h parkDeadlines) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = i, j
}

func (h parkDeadlines) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if h[parent].deadline <= h[i].deadline {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

func (h parkDeadlines) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].deadline < h[l].deadline {
			m = r
		}
		if h[i].deadline <= h[m].deadline {
			return
		}
		h.swap(i, m)
		i = m
	}
}
