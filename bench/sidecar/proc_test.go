package main

import (
	"os"
	"testing"
)

func TestReadCPUCountsThisProcess(t *testing.T) {
	// Spin until the kernel has charged this process a clock tick: the
	// figure is read, not assumed.
	var cpu float64
	for i := 0; cpu == 0 && i < 1000; i++ {
		x := 0
		for j := range 1_000_000 {
			x ^= j
		}
		_ = x
		var err error
		if cpu, err = readCPU(os.Getpid()); err != nil {
			t.Fatal(err)
		}
	}
	if cpu <= 0 {
		t.Fatalf("readCPU(self) = %v after spinning, want > 0", cpu)
	}
	st, err := readStatus(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.cpuSec < cpu || st.rssKB <= 0 {
		t.Errorf("readStatus(self) = %+v, want CPU >= %v and RSS > 0", st, cpu)
	}
	if _, err := readCPU(-1); err == nil {
		t.Error("readCPU(-1) = nil error")
	}
}

func TestVariantFlag(t *testing.T) {
	var v variantList
	if err := v.Set("gogc50:GOGC=50,GOMEMLIMIT=24MiB"); err != nil {
		t.Fatal(err)
	}
	if len(v) != 1 || v[0].name != "gogc50" || len(v[0].env) != 2 || v[0].env[0] != "GOGC=50" || v[0].env[1] != "GOMEMLIMIT=24MiB" {
		t.Errorf("-variant gogc50:GOGC=50,GOMEMLIMIT=24MiB = %+v", v)
	}
	for _, bad := range []string{"GOGC=50", ":GOGC=50", "x:GOGC"} {
		if err := v.Set(bad); err == nil {
			t.Errorf("-variant %q accepted", bad)
		}
	}
}
