package filepages

import (
	"fmt"
	"os"
	"syscall"
)

// Release advises MADV_DONTNEED on the running executable's read-only
// file mappings that hold no anonymous page (see the package doc) and
// returns the bytes of address space it advised. Safe to call at any
// time; other goroutines fault back the pages they run.
func Release() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("filepages: %w", err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("filepages: %w", err)
	}
	ms, err := parseSmaps(f)
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("filepages: %w", err)
	}
	var n int64
	for _, m := range releasable(ms, exe) {
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), syscall.MADV_DONTNEED); e != 0 {
			return n, fmt.Errorf("filepages: madvise %s %x-%x: %w", m.path, m.start, m.end, e)
		}
		n += int64(m.end - m.start)
	}
	return n, nil
}
