package listener

import (
	"log/slog"
	"testing"
	"time"
)

// DrainTime is Options.DrainTime when set, else Envoy's --drain-time-s
// default of 600 seconds.
func TestDrainTimeDefault(t *testing.T) {
	for set, want := range map[time.Duration]time.Duration{0: 600 * time.Second, 3 * time.Second: 3 * time.Second} {
		m := NewManager(Options{Logger: slog.New(slog.DiscardHandler), DrainTime: set})
		if got := m.DrainTime(); got != want {
			t.Errorf("Options.DrainTime %v: DrainTime() = %v, want %v", set, got, want)
		}
		m.Close()
	}
}
