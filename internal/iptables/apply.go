package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strings"
)

// Runner is the side-effecting half for one address family: read tables
// and feed `iptables-restore --noflush` (or the ip6tables pair).
// ExecRunner is the real one, iptablestest.RecordingRunner the fake for unit tests.
type Runner interface {
	// Save returns `iptables-save -t TABLE`, or every table for "".
	Save(ctx context.Context, table string) (string, error)
	// Restore feeds input to `iptables-restore --noflush` (one atomic
	// transaction per table).
	Restore(ctx context.Context, input string) error
}

// Router runs the `ip` command (policy routing, lo addresses).
type Router interface {
	// IP runs `ip ARGS...` and returns its standard output.
	IP(ctx context.Context, args ...string) (string, error)
}

// System is everything Install and Cleanup change, in one network
// namespace.
type System struct {
	IPv4 Runner
	// IPv6 may be nil when there is no ip6tables; then a plan with IPv6
	// rules fails and cleanup leaves IPv6 alone.
	IPv6   Runner
	Router Router
}

func (s System) runner(f Family) Runner {
	if f == IPv6 {
		return s.IPv6
	}
	return s.IPv4
}

// RestoreInput is the iptables-restore --noflush input that replaces
// whatever Strait state the tables hold (given as their iptables-save
// output, keyed by table) with rs, in one transaction per table. See
// restoreInput.
func (rs Rules) RestoreInput(current map[string]string) string {
	only := map[string]string{}
	for _, t := range rs.Tables() {
		only[t] = current[t]
	}
	return restoreInput(rs, only)
}

// restoreInput converges the tables in current (iptables-save output per
// table) and the tables rs uses to rs:
//
//   - every ISTIO_* chain, existing or new, is declared with ":CHAIN - [0:0]",
//     which under --noflush creates it or empties it;
//   - every existing rule in a built-in chain that jumps into an ISTIO_*
//     chain or carries OwnerComment is deleted ("-D", copied from the
//     iptables-save line);
//   - then rs's rules are appended, and ISTIO_* chains rs does not use are
//     deleted ("-X").
//
// So applying twice leaves one copy of each rule, and an empty rs removes
// everything Strait made and nothing else. Tables with nothing to do are
// left out; "" means there is nothing to do at all.
func restoreInput(rs Rules, current map[string]string) string {
	tables := rs.Tables()
	seen := map[string]bool{}
	for _, t := range tables {
		seen[t] = true
	}
	var extra []string
	for t := range current {
		if !seen[t] {
			extra = append(extra, t)
		}
	}
	sort.Strings(extra)
	tables = append(tables, extra...)

	var b strings.Builder
	for _, table := range tables {
		chains := rs.Chains(table)
		declared := map[string]bool{}
		for _, c := range chains {
			declared[c] = true
		}
		var stale, deletes []string
		for _, line := range strings.Split(current[table], "\n") {
			line = strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(line, ":"+chainPrefix):
				name, _, _ := strings.Cut(line[1:], " ")
				if !declared[name] {
					declared[name] = true
					stale = append(stale, name)
				}
			case strings.HasPrefix(line, "-A "):
				fields := strings.Fields(line)
				if len(fields) > 1 && builtinChains[fields[1]] && (jumpsToOwnChain(fields) || hasOwnerComment(fields)) {
					deletes = append(deletes, "-D"+line[2:])
				}
			}
		}
		hasRules := false
		for _, r := range rs.rules {
			if r.Table == table {
				hasRules = true
				break
			}
		}
		if !hasRules && len(chains) == 0 && len(stale) == 0 && len(deletes) == 0 {
			continue
		}
		b.WriteString("* " + table + "\n")
		for _, c := range append(chains, stale...) {
			b.WriteString(":" + c + " - [0:0]\n")
		}
		for _, d := range deletes {
			b.WriteString(d + "\n")
		}
		rs.writeRules(&b, table)
		for _, c := range stale {
			b.WriteString("-X " + c + "\n")
		}
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

func hasOwnerComment(fields []string) bool {
	for i := 0; i+1 < len(fields); i++ {
		if fields[i] == "--comment" && strings.Trim(fields[i+1], `"`) == OwnerComment {
			return true
		}
	}
	return false
}

// splitTables splits iptables-save output into its tables' parts.
func splitTables(save string) map[string]string {
	out := map[string]string{}
	table := ""
	for _, line := range strings.Split(save, "\n") {
		if strings.HasPrefix(line, "*") {
			table = strings.TrimSpace(line[1:])
		}
		if table != "" {
			out[table] += line + "\n"
		}
		if strings.TrimSpace(line) == "COMMIT" {
			table = ""
		}
	}
	return out
}

// Apply installs rs (IPv4 rules only) through r, replacing any earlier
// Strait rules in the tables rs uses, and returns the input it gave
// iptables-restore. Install does the whole Plan.
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

// Report is what Install or Cleanup did.
type Report struct {
	// Restores holds the iptables-restore (IPv4) and ip6tables-restore
	// (IPv6) inputs that were run.
	Restores map[Family]string
	// IPCommands are the `ip` commands that changed something.
	IPCommands [][]string
}

// String is a log-friendly rendering of the report.
func (r Report) String() string {
	var b strings.Builder
	for _, f := range []Family{IPv4, IPv6} {
		if in, ok := r.Restores[f]; ok {
			bin := "iptables-restore"
			if f == IPv6 {
				bin = "ip6tables-restore"
			}
			fmt.Fprintf(&b, "%s --noflush <<EOF\n%sEOF\n", bin, in)
		}
	}
	for _, c := range r.IPCommands {
		b.WriteString("ip " + strings.Join(c, " ") + "\n")
	}
	return b.String()
}

// Install converges the namespace to plan: the iptables rules of both
// families (through iptables-restore --noflush, replacing earlier Strait
// rules and chains), TPROXY's policy routing and the lo addresses. Running
// it twice changes nothing the second time; Install with an empty Plan is
// Cleanup.
func Install(ctx context.Context, sys System, plan Plan) (Report, error) {
	rep := Report{Restores: map[Family]string{}}
	for _, f := range []Family{IPv4, IPv6} {
		rs := plan.Rules(f)
		r := sys.runner(f)
		guardOnly := f == IPv6 && plan.IPv6Guard
		if r == nil {
			if rs.Empty() {
				continue
			}
			if guardOnly {
				if err := noIPv6(ctx, sys.Router, errors.New("ip6tables is not available")); err != nil {
					return rep, err
				}
				continue
			}
			return rep, fmt.Errorf("%s rules need ip6tables, which is not available", f)
		}
		saved, err := r.Save(ctx, "")
		if err != nil {
			if rs.Empty() {
				// Nothing to install; an unusable family (IPv6 disabled)
				// holds nothing of ours either.
				continue
			}
			if guardOnly {
				if err := noIPv6(ctx, sys.Router, err); err != nil {
					return rep, err
				}
				continue
			}
			return rep, fmt.Errorf("read %s tables: %w", f, err)
		}
		input := restoreInput(rs, splitTables(saved))
		if input == "" {
			continue
		}
		rep.Restores[f] = input
		if err := r.Restore(ctx, input); err != nil {
			return rep, fmt.Errorf("apply %s rules: %w", f, err)
		}
	}
	if sys.Router == nil {
		if len(plan.Routes) > 0 || len(plan.LoopbackAddrs) > 0 {
			return rep, errors.New("policy routing needs the ip command")
		}
		return rep, nil
	}
	cmds, err := convergeRouting(ctx, sys.Router, plan)
	rep.IPCommands = cmds
	return rep, err
}

// noIPv6 returns nil when the namespace has no IPv6 address at all
// (IPv6 disabled in the kernel or for every interface), so that the IPv6
// guard, which ip6tables could not be used for (why), has nothing to
// guard. Otherwise, or when it cannot tell, it returns an error: leaving
// IPv6 open would let connections reach the app past the proxy.
func noIPv6(ctx context.Context, r Router, why error) error {
	fail := func(detail string) error {
		return fmt.Errorf("IPv6 is not captured (no --dual-stack) and must be refused with ip6tables, which failed: %w; %s", why, detail)
	}
	if r == nil {
		return fail("without the ip command, this namespace's IPv6 addresses cannot be checked")
	}
	out, err := r.IP(ctx, "-6", "-o", "addr", "show")
	if err != nil {
		return fail(fmt.Sprintf("listing its IPv6 addresses: %v", err))
	}
	for _, line := range strings.Split(out, "\n") {
		// ::1 on lo alone is no way in from outside.
		if f := strings.Fields(line); len(f) > 3 && f[2] == "inet6" && f[1] != "lo" {
			return fail(fmt.Sprintf("the namespace has IPv6 address %s on %s (disable IPv6 there, or pass --dual-stack to capture it)", f[3], f[1]))
		}
	}
	return nil
}

// Cleanup removes every chain and rule Strait added (ISTIO_* chains, jumps
// into them and OwnerComment rules, in every table of both families), its
// policy routing (protocol RouteProtocol) and ::6 on lo, and nothing else.
func Cleanup(ctx context.Context, sys System) (Report, error) {
	return Install(ctx, sys, Plan{})
}

// ExecRunner runs iptables-save, iptables-restore and ip.
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
	var args []string
	if table != "" {
		args = []string{"-t", table}
	}
	cmd := e.command(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
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

// IP implements Router.
func (e ExecRunner) IP(ctx context.Context, args ...string) (string, error) {
	cmd := e.command(ctx, "ip", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

var (
	_ Runner = ExecRunner{}
	_ Router = ExecRunner{}
)
