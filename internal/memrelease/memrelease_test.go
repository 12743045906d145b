package memrelease

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The release waits for the configuration to stay unchanged for the quiet
// period: a burst of updates gets one release, after its last update; a
// stopped releaser releases nothing.
func TestReleaserWaitsForQuiet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		r := &Releaser{quiet: 2 * time.Second, release: func() { n.Add(1) }}
		for range 3 {
			r.Changed()
			time.Sleep(time.Second) // inside the quiet period
		}
		synctest.Wait()
		if got := n.Load(); got != 0 {
			t.Fatalf("released %d times during a burst of updates, want 0", got)
		}
		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		if got := n.Load(); got != 1 {
			t.Fatalf("released %d times after the quiet period, want 1", got)
		}
		r.Changed()
		r.Stop()
		r.Changed()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := n.Load(); got != 1 {
			t.Fatalf("released %d times in all, want 1 (stopped before the second)", got)
		}
	})
}
