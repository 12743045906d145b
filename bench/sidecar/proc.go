package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/straitmesh/strait/internal/procstat"
)

// procStatus is /proc/PID/status's memory lines, in KiB, and the CPU
// time the process has used (/proc/PID/stat's utime + stime): its start,
// the configuration's load and the idle until the measurement.
type procStatus struct {
	rssKB, hwmKB, anonKB, fileKB float64
	threads                      float64
	cpuSec                       float64
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on
// every Linux architecture Go supports (sysconf(_SC_CLK_TCK)).
const clockTicks = 100

// readCPU reads pid's user + system CPU seconds from /proc/PID/stat.
func readCPU(pid int) (float64, error) {
	f, err := procstat.Fields(pid, 13)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, v := range f[11:13] { // utime, stime: fields 14 and 15
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		sum += n
	}
	return sum / clockTicks, nil
}

func readStatus(pid int) (procStatus, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procStatus{}, err
	}
	defer f.Close()
	var st procStatus
	if st.cpuSec, err = readCPU(pid); err != nil {
		return st, err
	}
	fields := map[string]*float64{"VmRSS:": &st.rssKB, "VmHWM:": &st.hwmKB, "RssAnon:": &st.anonKB, "RssFile:": &st.fileKB, "Threads:": &st.threads}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Fields(sc.Text())
		if len(parts) < 2 {
			continue
		}
		if p, ok := fields[parts[0]]; ok {
			v, err := strconv.ParseFloat(parts[1], 64)
			if err != nil {
				return st, fmt.Errorf("/proc/%d/status %s: %w", pid, parts[0], err)
			}
			*p = v
		}
	}
	return st, sc.Err()
}

// children lists pid's child processes (every thread's
// /proc/PID/task/TID/children).
func children(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// saveSmaps copies /proc/PID/smaps to path and prints, to stderr, the
// resident KiB of each mapping of at least 64 KiB resident (the binary's
// segments, the heap arenas, the stacks): which part of the binary is
// paged in (bench/README.md).
func saveSmaps(pid int, path string) error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench/sidecar: %s\n", path)
	var head string
	var size float64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			head = line
		case len(f) >= 2 && f[0] == "Size:":
			size, _ = strconv.ParseFloat(f[1], 64)
		case len(f) >= 2 && f[0] == "Rss:":
			if rss, _ := strconv.ParseFloat(f[1], 64); rss >= 64 {
				fmt.Fprintf(os.Stderr, "  %8.0f of %8.0f KiB  %s\n", rss, size, head)
			}
		}
	}
	return nil
}
