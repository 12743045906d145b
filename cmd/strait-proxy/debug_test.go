package main

import (
	"path/filepath"
	"runtime"
	"testing"
)

// Without STRAIT_PROXY_DEBUG_ADDR the proxy turns the Go runtime's heap
// profiling off before it loads anything (no reader, so no samples and no
// profile buckets: bench/README.md, sidecar sixth round); with it, heap
// profiling stays as the runtime (or GODEBUG=memprofilerate) set it.
func TestHeapProfilingOnlyWithDebugAddr(t *testing.T) {
	old := runtime.MemProfileRate
	t.Cleanup(func() { runtime.MemProfileRate = old })
	missing := filepath.Join(t.TempDir(), "no-bootstrap.yaml")

	runtime.MemProfileRate = 4096
	t.Setenv("STRAIT_PROXY_DEBUG_ADDR", "127.0.0.1:0")
	if err := run([]string{"-c", missing}); err == nil {
		t.Fatal("run with a missing bootstrap returned nil")
	}
	if runtime.MemProfileRate != 4096 {
		t.Errorf("with STRAIT_PROXY_DEBUG_ADDR: MemProfileRate = %d, want 4096 kept", runtime.MemProfileRate)
	}

	t.Setenv("STRAIT_PROXY_DEBUG_ADDR", "")
	if err := run([]string{"-c", missing}); err == nil {
		t.Fatal("run with a missing bootstrap returned nil")
	}
	if runtime.MemProfileRate != 0 {
		t.Errorf("without STRAIT_PROXY_DEBUG_ADDR: MemProfileRate = %d, want 0 (off)", runtime.MemProfileRate)
	}
}
