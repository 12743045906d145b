package main

import (
	"runtime"
	"testing"
)

// capProcs lowers GOMAXPROCS to agentMaxProcs, never raises it, and
// leaves a GOMAXPROCS from the environment alone.
func TestCapProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	tests := []struct {
		name  string
		start int
		env   string // GOMAXPROCS in the environment
		want  int
	}{
		{"many cores", 64, "", agentMaxProcs},
		{"one core", 1, "", 1},
		{"at the cap", agentMaxProcs, "", agentMaxProcs},
		{"GOMAXPROCS set", 16, "16", 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runtime.GOMAXPROCS(tt.start)
			getenv := func(k string) string {
				if k == "GOMAXPROCS" {
					return tt.env
				}
				return ""
			}
			if got := capProcs(getenv); got != tt.want || runtime.GOMAXPROCS(0) != tt.want {
				t.Errorf("capProcs from %d: returned %d, GOMAXPROCS %d, want %d", tt.start, got, runtime.GOMAXPROCS(0), tt.want)
			}
		})
	}
}
