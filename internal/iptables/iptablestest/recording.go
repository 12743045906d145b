// Package iptablestest holds the fake iptables Runner and Router for
// tests: it records what would be run and changes nothing. It does not
// import package iptables, so that iptables' own internal tests can use it.
package iptablestest

import (
	"context"
	"sort"
	"strings"
	"sync"
)

// RecordingRunner is a Runner and Router that changes nothing: Save
// answers from Tables, Restore records its input, IP records its
// arguments and answers from IPOutput. Safe for concurrent use.
type RecordingRunner struct {
	mu sync.Mutex // guards the fields below
	// Tables maps a table name to the iptables-save output Save returns;
	// Save("") returns all of them, in table-name order.
	Tables map[string]string
	// Restores holds each Restore input in order.
	Restores []string
	// Err, if set, is returned by Restore.
	Err error
	// IPOutput maps `ip` arguments (joined with spaces) to their output.
	IPOutput map[string]string
	// IPCalls holds each IP call's arguments in order.
	IPCalls [][]string
}

// Save implements Runner.
func (f *RecordingRunner) Save(_ context.Context, table string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if table != "" {
		return f.Tables[table], nil
	}
	names := make([]string, 0, len(f.Tables))
	for t := range f.Tables {
		names = append(names, t)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, t := range names {
		b.WriteString(f.Tables[t])
	}
	return b.String(), nil
}

// Restore implements Runner.
func (f *RecordingRunner) Restore(_ context.Context, input string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Restores = append(f.Restores, input)
	return f.Err
}

// IP implements Router.
func (f *RecordingRunner) IP(_ context.Context, args ...string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.IPCalls = append(f.IPCalls, append([]string(nil), args...))
	return f.IPOutput[strings.Join(args, " ")], nil
}
