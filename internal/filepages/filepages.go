// Package filepages drops the pages of a process's own executable from
// its page tables once they are no longer in use, so that the process's
// resident set (RSS) is its working set rather than every page start-up
// touched.
//
// A Go binary's text and read-only data are mapped from the file. Start-up
// touches a large part of them once (package initialisation registers
// every protobuf descriptor, the linker's tables are read), and the kernel
// maps more than is touched: a read fault maps the neighbouring pages
// already in the page cache too (fault-around, and whole large folios).
// An idle strait-proxy has ~25 MiB of its 42 MB binary resident, strait-agent
// ~19 MiB of 30 MB, though a process that only imports their packages and
// sleeps uses a fraction of it. Release advises MADV_DONTNEED on the
// executable's read-only mappings whose resident pages are all still the
// file's (no anonymous, copied-on-write page, as a relocated one would be):
// that changes no byte the process sees, and the pages it runs again fault
// back in from the page cache (a minor fault, no I/O while the file's pages
// stay cached). The page cache itself is untouched and shared between the
// sidecars of a node; only the count of pages mapped in this process drops.
package filepages

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// mapping is one /proc/PID/smaps entry.
type mapping struct {
	start, end uint64
	writable   bool
	path       string
	anonymous  bool // Anonymous: is not 0 kB
}

// parseSmaps reads /proc/PID/smaps.
func parseSmaps(r io.Reader) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fs := strings.Fields(line)
		if len(fs) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fs[0], "-"); ok && len(fs) >= 5 && len(fs[1]) == 4 {
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("smaps: bad range in %q", line)
			}
			m := mapping{start: start, end: end, writable: fs[1][1] == 'w'}
			if len(fs) >= 6 {
				m.path = strings.Join(fs[5:], " ")
			}
			out = append(out, m)
			continue
		}
		if fs[0] == "Anonymous:" && len(out) > 0 && len(fs) >= 2 && fs[1] != "0" {
			out[len(out)-1].anonymous = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("smaps: %w", err)
	}
	return out, nil
}

// releasable returns the mappings of exe that Release may advise:
// read-only and without an anonymous page.
func releasable(ms []mapping, exe string) []mapping {
	var out []mapping
	for _, m := range ms {
		if m.writable || m.anonymous || m.end <= m.start {
			continue
		}
		if m.path != exe && m.path != exe+" (deleted)" {
			continue
		}
		out = append(out, m)
	}
	return out
}
