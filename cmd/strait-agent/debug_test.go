package main

import (
	"runtime"
	"testing"
)

// Without STRAIT_AGENT_DEBUG_ADDR `proxy sidecar` turns the Go runtime's
// heap profiling off first, before its settings are even read (no
// reader, so no samples and no profile buckets: bench/README.md, sidecar
// sixth round); with it, heap profiling stays as the runtime (or
// GODEBUG=memprofilerate) set it. A PROXY_CONFIG that is not JSON ends
// the command right after.
func TestHeapProfilingOnlyWithDebugAddr(t *testing.T) {
	old := runtime.MemProfileRate
	t.Cleanup(func() { runtime.MemProfileRate = old })
	t.Setenv("PROXY_CONFIG", "{not json")
	run := func() {
		t.Helper()
		cmd := newRootCmd()
		cmd.SetArgs([]string{"proxy", "sidecar"})
		if err := cmd.Execute(); err == nil {
			t.Fatal("proxy sidecar with PROXY_CONFIG {not json returned nil")
		}
	}

	runtime.MemProfileRate = 4096
	t.Setenv("STRAIT_AGENT_DEBUG_ADDR", "127.0.0.1:0")
	run()
	if runtime.MemProfileRate != 4096 {
		t.Errorf("with STRAIT_AGENT_DEBUG_ADDR: MemProfileRate = %d, want 4096 kept", runtime.MemProfileRate)
	}

	t.Setenv("STRAIT_AGENT_DEBUG_ADDR", "")
	run()
	if runtime.MemProfileRate != 0 {
		t.Errorf("without STRAIT_AGENT_DEBUG_ADDR: MemProfileRate = %d, want 0 (off)", runtime.MemProfileRate)
	}
}
