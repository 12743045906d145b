package http1

import (
	"sync"
	"sync/atomic"
	"time"
)

// Reading the clock costs about 0.2 µs here (more on VMs whose clock
// source is not the TSC), and the request path would otherwise read it
// several times per request to set timeouts. Timeouts of seconds or more
// don't need that precision: they use a clock ticked by one goroutine.

// CoarseTick is the resolution of CoarseNow.
const CoarseTick = 100 * time.Millisecond

// preciseBelow is the shortest timeout worth the coarse clock's error.
const preciseBelow = 2 * time.Second

var (
	coarseNanos atomic.Int64
	coarseOnce  sync.Once
)

// CoarseNow returns the time to within CoarseTick, without reading the
// clock. It has no monotonic reading.
func CoarseNow() time.Time {
	coarseOnce.Do(func() {
		coarseNanos.Store(time.Now().UnixNano())
		go func() {
			for t := range time.Tick(CoarseTick) {
				coarseNanos.Store(t.UnixNano())
			}
		}()
	})
	return time.Unix(0, coarseNanos.Load())
}

// Deadline returns the time d from now: from the coarse clock when d is
// long enough for its error not to matter, else from the real one. A zero
// d is the zero time (no deadline).
func Deadline(d time.Duration) time.Time {
	switch {
	case d <= 0:
		return time.Time{}
	case d < preciseBelow:
		return time.Now().Add(d)
	}
	return CoarseNow().Add(d)
}
