package http1

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// parkedConn records what the Parker did with it.
type parkedConn struct {
	resumed, finished chan struct{}
	finishedAt        atomic.Int64 // Unix nanoseconds
}

func newParkedConn() *parkedConn {
	return &parkedConn{resumed: make(chan struct{}, 1), finished: make(chan struct{}, 1)}
}

func (c *parkedConn) Resume() { c.resumed <- struct{}{} }
func (c *parkedConn) Finish() {
	c.finishedAt.Store(time.Now().UnixNano())
	c.finished <- struct{}{}
}

// waitFor reports whether ch receives within d.
func waitFor(ch chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// TestParker parks real loopback sockets: one that becomes readable is
// resumed (and no longer parked), one whose deadline passes is finished,
// one taken back is neither, and Close finishes what is still parked.
func TestParker(t *testing.T) {
	p := NewParker(slog.New(slog.DiscardHandler))

	client, server := tcpPair(t)
	nc := WrapConn(server)
	c, slot := newParkedConn(), &ParkSlot{}
	if !p.Park(slot, nc, c, time.Time{}) {
		t.Fatal("Park = false for a TCP socket")
	}
	if _, err := client.Write([]byte("GET / HTTP/1.1\r\n")); err != nil {
		t.Fatal(err)
	}
	if !waitFor(c.resumed, 5*time.Second) {
		t.Fatal("a readable parked connection was not resumed")
	}
	if p.Take(slot) {
		t.Error("Take = true for a connection already resumed")
	}

	_, server2 := tcpPair(t)
	c2, slot2 := newParkedConn(), &ParkSlot{}
	if !p.Park(slot2, WrapConn(server2), c2, time.Now().Add(50*time.Millisecond)) {
		t.Fatal("Park = false")
	}
	if !waitFor(c2.finished, 5*time.Second) {
		t.Fatal("a parked connection was not finished at its deadline")
	}
	if waitFor(c2.resumed, 0) {
		t.Error("a connection finished at its deadline was also resumed")
	}

	_, server3 := tcpPair(t)
	c3, slot3 := newParkedConn(), &ParkSlot{}
	if !p.Park(slot3, WrapConn(server3), c3, time.Now().Add(time.Hour)) {
		t.Fatal("Park = false")
	}
	if !p.Take(slot3) {
		t.Fatal("Take = false for a parked connection")
	}
	slot3.CloseFD()

	_, server4 := tcpPair(t)
	c4, slot4 := newParkedConn(), &ParkSlot{}
	if !p.Park(slot4, WrapConn(server4), c4, time.Time{}) {
		t.Fatal("Park = false")
	}
	p.Close()
	if !waitFor(c4.finished, 5*time.Second) {
		t.Error("Close did not finish a parked connection")
	}
	if waitFor(c3.finished, 0) || waitFor(c3.resumed, 0) {
		t.Error("a connection taken back was finished or resumed")
	}
	_, server5 := tcpPair(t)
	if p.Park(&ParkSlot{}, WrapConn(server5), newParkedConn(), time.Time{}) {
		t.Error("Park = true after Close")
	}
}

// TestParkerDeadlines parks connections with deadlines in no order (one
// timer serves them all): each is finished at its deadline, not before,
// and one taken back before its deadline never is.
func TestParkerDeadlines(t *testing.T) {
	p := NewParker(slog.New(slog.DiscardHandler))
	defer p.Close()
	const n = 24
	start := time.Now()
	type parked struct {
		c        *parkedConn
		slot     *ParkSlot
		deadline time.Time
	}
	conns := make([]parked, n)
	for i := range conns {
		_, server := tcpPair(t)
		// Deadlines 40 ms apart, parked in a shuffled order.
		dl := start.Add(time.Duration(50+((i*7)%n)*40) * time.Millisecond)
		conns[i] = parked{newParkedConn(), &ParkSlot{}, dl}
		if !p.Park(conns[i].slot, WrapConn(server), conns[i].c, dl) {
			t.Fatal("Park = false")
		}
	}
	for i := 0; i < n; i += 3 { // take every third back
		if !p.Take(conns[i].slot) {
			t.Fatalf("Take(%d) = false", i)
		}
		conns[i].slot.CloseFD()
	}
	for i, pc := range conns {
		if i%3 == 0 {
			continue
		}
		if !waitFor(pc.c.finished, 5*time.Second) {
			t.Fatalf("connection %d (deadline +%v) was not finished", i, pc.deadline.Sub(start))
		}
		at := time.Unix(0, pc.c.finishedAt.Load())
		if at.Before(pc.deadline) {
			t.Fatalf("connection %d finished %v before its deadline", i, pc.deadline.Sub(at))
		}
		if late := at.Sub(pc.deadline); late > 300*time.Millisecond {
			t.Fatalf("connection %d finished %v after its deadline", i, late)
		}
	}
	for i := 0; i < n; i += 3 {
		if waitFor(conns[i].c.finished, 0) || waitFor(conns[i].c.resumed, 0) {
			t.Errorf("connection %d, taken back, was finished or resumed", i)
		}
	}
}

// TestParkerTrimsAfterABurst: once trimMinParks connections parked and
// parking then went quiet for trimQuiet, the Parker gives the burst's
// memory back (once); fewer parks, or parks still coming, do not trim.
func TestParkerTrimsAfterABurst(t *testing.T) {
	p := NewParker(slog.New(slog.DiscardHandler))
	defer p.Close()
	lastTrim := func() time.Time {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.trim.lastTrim
	}
	park := func() {
		t.Helper()
		_, server := tcpPair(t)
		if !p.Park(&ParkSlot{}, WrapConn(server), newParkedConn(), time.Time{}) {
			t.Fatal("Park = false")
		}
	}
	for range trimMinParks - 1 {
		park()
	}
	time.Sleep(trimQuiet + 200*time.Millisecond)
	if !lastTrim().IsZero() {
		t.Fatalf("trimmed after %d parks, fewer than %d", trimMinParks-1, trimMinParks)
	}
	park()
	if !lastTrim().IsZero() {
		t.Fatal("trimmed while connections were still parking")
	}
	deadline := time.Now().Add(trimQuiet + 5*time.Second)
	for lastTrim().IsZero() {
		if time.Now().After(deadline) {
			t.Fatalf("no trim %v after a burst of %d parks went quiet", trimQuiet+5*time.Second, trimMinParks)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.mu.Lock()
	parks := p.trim.parks
	p.mu.Unlock()
	if parks != 0 {
		t.Fatalf("%d parks counted after the trim, want 0", parks)
	}
}
