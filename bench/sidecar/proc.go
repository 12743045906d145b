package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// procStatus is /proc/PID/status's memory lines, in KiB.
type procStatus struct {
	rssKB, hwmKB, anonKB, fileKB float64
	threads                      float64
}

func readStatus(pid int) (procStatus, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procStatus{}, err
	}
	defer f.Close()
	var st procStatus
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
