package localmesh

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/straitmesh/strait/internal/procstat"
)

// A mesh whose process was killed (a test binary past its timeout, a
// SIGKILL) cannot run Close: its straitd, sidecars and apps keep running,
// and its network namespaces and bridge stay. Each mesh therefore records
// in its work directory who made it and what it started, and the next
// Start removes what dead meshes left.
const (
	// ownerFile holds "PID START" of the process that made the mesh.
	ownerFile = "owner"
	// procsFile holds one "PID START" line per process group the mesh
	// started (straitd, each agent and app: every one leads its group).
	procsFile = "procs"
	// networkFile holds "BRIDGE NETNS-PREFIX" of the mesh's network.
	networkFile = "network"
)

// procStart is the start time of pid (field 22 of /proc/PID/stat, in
// clock ticks since boot): with the pid it names one process, not a later
// one that reused the number.
func procStart(pid int) (uint64, error) {
	f, err := procstat.Fields(pid, 20)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// procLine is "PID START" of pid.
func procLine(pid int) (string, error) {
	st, err := procStart(pid)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d %d\n", pid, st), nil
}

// parseProcLine reads a line of procLine.
func parseProcLine(line string) (pid int, start uint64, ok bool) {
	f := strings.Fields(line)
	if len(f) != 2 {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	return pid, start, err1 == nil && err2 == nil && pid > 0
}

// running reports whether the process named by a procLine still runs.
func running(line string) bool {
	pid, start, ok := parseProcLine(line)
	if !ok {
		return false
	}
	st, err := procStart(pid)
	return err == nil && st == start
}

// appendLine adds line to the file name in dir.
func appendLine(dir, name, line string) error {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line)
	return errors.Join(err, f.Close())
}

// recordProcess notes a started process group's leader for the sweep.
func (m *Mesh) recordProcess(pid int) error {
	line, err := procLine(pid)
	if err != nil {
		return fmt.Errorf("record process %d: %w", pid, err)
	}
	return appendLine(m.workDir, procsFile, line)
}

// sweepStale removes what meshes of dead processes left under tmp: their
// process groups (SIGKILL, only those whose start time still matches),
// the processes in their network namespaces, the namespaces, the bridge
// and the work directory. A directory without an owner file is a mesh
// being made (or not one of ours) and is left alone.
func sweepStale(ctx context.Context, tmp string, log *slog.Logger) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, "strait-mesh-*"))
	for _, dir := range dirs {
		owner, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil || running(string(owner)) {
			continue
		}
		log.Info("removing a mesh left by a dead process", "dir", dir, "owner", strings.TrimSpace(string(owner)))
		if err := removeStale(ctx, dir); err != nil {
			log.Warn("stale mesh not fully removed", "dir", dir, "error", err)
		}
	}
}

// removeStale removes one dead mesh's leftovers.
func removeStale(ctx context.Context, dir string) error {
	var errs []error
	if b, err := os.ReadFile(filepath.Join(dir, procsFile)); err == nil {
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			if pid, _, ok := parseProcLine(sc.Text()); ok && running(sc.Text()) {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, networkFile)); err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 {
			errs = append(errs, removeNetns(ctx, f[1]), removeLink(ctx, f[0]))
		}
	}
	errs = append(errs, os.RemoveAll(dir))
	return errors.Join(errs...)
}

// removeNetns kills the processes in, and deletes, every network
// namespace whose name starts with prefix.
func removeNetns(ctx context.Context, prefix string) error {
	out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return fmt.Errorf("ip netns list: %w", err)
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], prefix) {
			continue
		}
		pids, _ := exec.CommandContext(ctx, "ip", "netns", "pids", f[0]).Output()
		for _, p := range strings.Fields(string(pids)) {
			if pid, err := strconv.Atoi(p); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if out, err := exec.CommandContext(ctx, "ip", "netns", "del", f[0]).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip netns del %s: %w: %s", f[0], err, strings.TrimSpace(string(out))))
		}
	}
	return errors.Join(errs...)
}

// removeLink deletes the bridge, if it is still there.
func removeLink(ctx context.Context, name string) error {
	if _, err := os.Stat("/sys/class/net/" + name); err != nil {
		return nil
	}
	if out, err := exec.CommandContext(ctx, "ip", "link", "del", name).CombinedOutput(); err != nil {
		return fmt.Errorf("ip link del %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
