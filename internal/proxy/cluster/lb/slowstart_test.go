package lb

import (
	"testing"
	"time"
)

// A host that just joined gets min_weight_percent of its weight, then
// more as its window passes, then all of it.
func TestSlowStartFactor(t *testing.T) {
	ss := &SlowStart{window: 100 * time.Second, aggression: 1, minWeight: 0.1}
	now := time.Now()
	for _, c := range []struct {
		age  time.Duration
		want float64
	}{{0, 0.1}, {50 * time.Second, 0.5}, {99 * time.Second, 0.99}, {100 * time.Second, 1}, {time.Hour, 1}} {
		if got := ss.factor(now.Add(-c.age), now); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("factor at %v = %v, want %v", c.age, got, c.want)
		}
	}
}
