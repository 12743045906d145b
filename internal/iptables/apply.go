package iptables

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
)

// Runner is the side-effecting half: read a table and feed
// `iptables-restore --noflush`. ExecRunner is the real one,
// RecordingRunner the fake for unit tests.
type Runner interface {
	// Save returns `iptables-save -t TABLE`.
	Save(ctx context.Context, table string) (string, error)
	// Restore feeds input to `iptables-restore --noflush` (one atomic
	// transaction per table).
	Restore(ctx context.Context, input string) error
}

// RestoreInput is the iptables-restore --noflush input that replaces
// whatever ISTIO_* state the tables hold (given as their iptables-save
// output, keyed by table) with rs, in one transaction per table:
//
//   - every ISTIO_* chain, existing or new, is declared with ":CHAIN - [0:0]",
//     which under --noflush creates it or empties it;
//   - every existing jump from a built-in chain into an ISTIO_* chain is
//     deleted ("-D", copied from the iptables-save line);
//   - then the rules are appended.
//
// So applying twice leaves one copy of each rule.
func (rs Rules) RestoreInput(current map[string]string) string {
	var b strings.Builder
	for _, table := range rs.Tables() {
		chains := rs.Chains(table)
		declared := map[string]bool{}
		for _, c := range chains {
			declared[c] = true
		}
		var deletes []string
		for _, line := range strings.Split(current[table], "\n") {
			line = strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(line, ":"+chainPrefix):
				name, _, _ := strings.Cut(line[1:], " ")
				if !declared[name] {
					declared[name] = true
					chains = append(chains, name)
				}
			case strings.HasPrefix(line, "-A "):
				fields := strings.Fields(line)
				if len(fields) > 1 && builtinChains[fields[1]] && jumpsToOwnChain(fields) {
					deletes = append(deletes, "-D"+line[2:])
				}
			}
		}
		b.WriteString("* " + table + "\n")
		for _, c := range chains {
			b.WriteString(":" + c + " - [0:0]\n")
		}
		for _, d := range deletes {
			b.WriteString(d + "\n")
		}
		rs.writeRules(&b, table)
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

func jumpsToOwnChain(fields []string) bool {
	for i := 0; i+1 < len(fields); i++ {
		if (fields[i] == "-j" || fields[i] == "-g") && strings.HasPrefix(fields[i+1], chainPrefix) {
			return true
		}
	}
	return false
}

// Apply installs rs through r, replacing any earlier ISTIO_* rules, and
// returns the input it gave iptables-restore.
func Apply(ctx context.Context, r Runner, rs Rules) (string, error) {
	current := map[string]string{}
	for _, table := range rs.Tables() {
		out, err := r.Save(ctx, table)
		if err != nil {
			return "", fmt.Errorf("read %s table: %w", table, err)
		}
		current[table] = out
	}
	input := rs.RestoreInput(current)
	if err := r.Restore(ctx, input); err != nil {
		return input, fmt.Errorf("apply rules: %w", err)
	}
	return input, nil
}

// ExecRunner runs iptables-save and iptables-restore.
type ExecRunner struct {
	// Command builds the command; nil means exec.CommandContext. Tests use
	// it to run inside a network namespace (testenv's Pod.Command).
	Command func(ctx context.Context, name string, args ...string) *exec.Cmd
	// SaveBinary and RestoreBinary default to "iptables-save" and
	// "iptables-restore".
	SaveBinary, RestoreBinary string
}

func (e ExecRunner) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if e.Command != nil {
		return e.Command(ctx, name, args...)
	}
	return exec.CommandContext(ctx, name, args...)
}

// Save implements Runner.
func (e ExecRunner) Save(ctx context.Context, table string) (string, error) {
	bin := orDefault(e.SaveBinary, "iptables-save")
	cmd := e.command(ctx, bin, "-t", table)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s -t %s: %w: %s", bin, table, err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// Restore implements Runner.
func (e ExecRunner) Restore(ctx context.Context, input string) error {
	bin := orDefault(e.RestoreBinary, "iptables-restore")
	cmd := e.command(ctx, bin, "--noflush")
	cmd.Stdin = strings.NewReader(input)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s --noflush: %w: %s", bin, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// RecordingRunner is a Runner that changes nothing: Save answers from
// Tables, Restore records its input. Safe for concurrent use.
type RecordingRunner struct {
	mu sync.Mutex // guards the fields below
	// Tables maps a table name to the iptables-save output Save returns.
	Tables map[string]string
	// Restores holds each Restore input in order.
	Restores []string
	// Err, if set, is returned by Restore.
	Err error
}

// Save implements Runner.
func (f *RecordingRunner) Save(_ context.Context, table string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Tables[table], nil
}

// Restore implements Runner.
func (f *RecordingRunner) Restore(_ context.Context, input string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Restores = append(f.Restores, input)
	return f.Err
}

var (
	_ Runner = ExecRunner{}
	_ Runner = (*RecordingRunner)(nil)
)
