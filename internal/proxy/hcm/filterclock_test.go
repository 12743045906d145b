package hcm

import (
	"strings"
	"testing"
	"time"
)

// TestFilterStateNow: the Completers' start time, derived from an epoch
// by a monotonic reading, follows the clock (a later call is later by
// the time that passed, and within the clock's reading of now), keeps
// a monotonic reading (durations from it are monotonic), and an epoch
// older than epochSpan is read again.
func TestFilterStateNow(t *testing.T) {
	var st filterState
	a := st.now()
	time.Sleep(3 * time.Millisecond)
	b := st.now()
	if d := b.Sub(a); d < 3*time.Millisecond || d > time.Second {
		t.Errorf("second reading %v after the first, slept 3ms", d)
	}
	if d := time.Since(b); d < 0 || d > time.Second {
		t.Errorf("time.Since(now()) = %v", d)
	}
	if d := time.Until(b.Round(0)); d > 50*time.Millisecond || d < -time.Second {
		t.Errorf("wall time of now() %v off the clock's (%v)", b.Round(0), time.Now())
	}
	if !strings.Contains(b.String(), " m=") { // the monotonic reading, as Time.String prints it
		t.Error("now() has no monotonic reading")
	}
	old := time.Now().Add(-2 * epochSpan)
	st.epoch = old
	c := st.now()
	if !st.epoch.After(old.Add(epochSpan)) || c.Sub(st.epoch) != 0 {
		t.Errorf("an epoch %v old was kept (now %v, epoch %v)", time.Since(old), c, st.epoch)
	}
}
