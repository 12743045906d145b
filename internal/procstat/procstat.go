// Package procstat reads a process's /proc/PID/stat.
package procstat

import (
	"fmt"
	"os"
	"strings"
)

// Fields returns the fields of /proc/PID/stat after the command name:
// Fields(pid)[0] is field 3 (state), [n] is field n+3 (proc(5)'s
// numbering). It fails when there are fewer than atLeast of them.
func Fields(pid, atLeast int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	return parse(pid, string(b), atLeast)
}

func parse(pid int, stat string, atLeast int) ([]string, error) {
	// The command name, field 2, is in parentheses and may hold spaces
	// and parentheses: the fields after its last ')' start at field 3.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < atLeast {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields after the name, want %d", pid, len(f), atLeast)
	}
	return f, nil
}
