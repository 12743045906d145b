package http1

import (
	"runtime"
	"runtime/debug"
	"time"
)

// After a burst of connections parks, what served them (their goroutine
// stacks, read buffers, request state) is garbage or pooled, and the Go
// runtime keeps that memory until its next collection (an idle proxy has
// one every two minutes) and returns it to the system slowly after, so
// the proxy's resident memory stays at the burst's peak long after it is
// idle. A Parker that parked at least trimMinParks connections since it
// last trimmed, and then parked none for trimQuiet, gives that memory back
// at once (debug.FreeOSMemory: a collection and a scavenge, some
// milliseconds of CPU), at most once per trimEvery. While connections keep
// parking it never trims.
const (
	trimMinParks = 1000
	trimQuiet    = time.Second
	trimEvery    = 30 * time.Second
)

// trimState is a Parker's, guarded by its mu.
type trimState struct {
	parks    int       // connections parked since the last trim
	lastPark time.Time // when the last one parked
	lastTrim time.Time
	timer    *time.Timer // runs trim; armed while armed
	armed    bool
}

// parkedLocked counts a connection just parked and arms the trim.
func (p *Parker) parkedLocked() {
	t := &p.trim
	t.parks++
	t.lastPark = time.Now()
	if t.parks < trimMinParks || t.armed {
		return
	}
	t.armed = true
	if t.timer == nil {
		t.timer = time.AfterFunc(trimQuiet, p.trimMemory)
		return
	}
	t.timer.Reset(trimQuiet)
}

// trimMemory gives the memory of a parked burst back once parking has
// been quiet for trimQuiet (else it waits on).
func (p *Parker) trimMemory() {
	p.mu.Lock()
	t := &p.trim
	if p.closed {
		t.armed = false
		p.mu.Unlock()
		return
	}
	now := time.Now()
	wait := trimQuiet - now.Sub(t.lastPark)
	if !t.lastTrim.IsZero() {
		wait = max(wait, trimEvery-now.Sub(t.lastTrim))
	}
	if wait > 0 {
		t.timer.Reset(wait)
		p.mu.Unlock()
		return
	}
	t.armed, t.parks, t.lastTrim = false, 0, now
	p.mu.Unlock()
	// A first collection moves the pools' buffers (sync.Pool) to their
	// victim caches, the second, FreeOSMemory's, frees them with the rest.
	runtime.GC()
	debug.FreeOSMemory()
}
