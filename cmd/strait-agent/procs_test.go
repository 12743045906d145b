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

// inProcessProcs gives the process the proxy's --concurrency, leaves the
// runtime's default for 0 and a GOMAXPROCS from the environment alone.
func TestInProcessProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	tests := []struct {
		name               string
		start, concurrency int
		env                string
		want               int
	}{
		{"Istio's 2 on many cores", 64, 2, "", 2},
		{"4 on 2 cores", 2, 4, "", 4},
		{"one per core", 8, 0, "", 8},
		{"GOMAXPROCS set", 16, 2, "16", 16},
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
			if got := inProcessProcs(getenv, tt.concurrency); got != tt.want || runtime.GOMAXPROCS(0) != tt.want {
				t.Errorf("inProcessProcs(%d) from %d: returned %d, GOMAXPROCS %d, want %d", tt.concurrency, tt.start, got, runtime.GOMAXPROCS(0), tt.want)
			}
		})
	}
}
