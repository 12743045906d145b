package localmesh

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/testreq"
)

func TestProcLine(t *testing.T) {
	line, err := procLine(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !running(line) {
		t.Fatalf("running(%q) = false for this process", line)
	}
	pid, start, ok := parseProcLine(line)
	if !ok || pid != os.Getpid() {
		t.Fatalf("parseProcLine(%q) = %d, %d, %v", line, pid, start, ok)
	}
	for _, bad := range []string{"", "12", "x 1", "1 y", "0 5", "-3 5", "1 2 3"} {
		if _, _, ok := parseProcLine(bad); ok {
			t.Errorf("parseProcLine(%q) ok", bad)
		}
	}
	// The same pid with another start time is another process.
	if running(itoaLine(os.Getpid(), start+1)) {
		t.Error("a line whose start time differs counts as running")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if running(itoaLine(cmd.Process.Pid, 1)) {
		t.Error("an exited process counts as running")
	}
}

func itoaLine(pid int, start uint64) string { return fmt.Sprintf("%d %d", pid, start) }

// TestSweepStaleMesh makes what a killed mesh leaves (a process group of
// its own, a process in a network namespace named as the mesh's pods are,
// a bridge, the work directory with a dead owner) beside a live mesh's
// directory, and checks that the sweep removes the first and keeps the
// second.
func TestSweepStaleMesh(t *testing.T) {
	testreq.Root(t, "creates network namespaces and a bridge")
	ipBin := testreq.Binary(t, "ip", "iproute2")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	idb := make([]byte, 3)
	_, _ = rand.Read(idb)
	id := hex.EncodeToString(idb)
	bridge, netnsName := "stb"+id, "strait-"+id+"-pod"
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.CommandContext(ctx, ipBin, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	t.Cleanup(func() {
		_ = exec.Command(ipBin, "netns", "del", netnsName).Run()
		_ = exec.Command(ipBin, "link", "del", bridge).Run()
	})
	ip("link", "add", bridge, "type", "bridge")
	ip("netns", "add", netnsName)

	tmp := t.TempDir()
	dead := filepath.Join(tmp, "strait-mesh-dead")
	live := filepath.Join(tmp, "strait-mesh-live")
	making := filepath.Join(tmp, "strait-mesh-making") // no owner yet
	for _, d := range []string{dead, live, making} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The dead owner: a process that ran and exited.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	goneStart := uint64(1)
	write := func(dir, name, body string) {
		t.Helper()
		if err := appendLine(dir, name, body); err != nil {
			t.Fatal(err)
		}
	}
	write(dead, ownerFile, itoaLine(gone.Process.Pid, goneStart)+"\n")
	self, err := procLine(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	write(live, ownerFile, self)

	// The dead mesh's straitd: a process group of its own.
	group := exec.Command("sleep", "300")
	group.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := group.Start(); err != nil {
		t.Fatal(err)
	}
	groupDone := make(chan struct{})
	go func() { _ = group.Wait(); close(groupDone) }()
	t.Cleanup(func() { _ = group.Process.Kill() })
	line, err := procLine(group.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	write(dead, procsFile, line)
	// The live mesh's process: recorded, and must survive.
	keep := exec.Command("sleep", "300")
	keep.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := keep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = keep.Process.Kill(); _ = keep.Wait() })
	keepLine, err := procLine(keep.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	write(live, procsFile, keepLine)
	// A sidecar in the dead mesh's pod namespace, not in a recorded group.
	inNetns := exec.Command(ipBin, "netns", "exec", netnsName, "sleep", "300")
	inNetns.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := inNetns.Start(); err != nil {
		t.Fatal(err)
	}
	inNetnsDone := make(chan struct{})
	go func() { _ = inNetns.Wait(); close(inNetnsDone) }()
	t.Cleanup(func() { _ = inNetns.Process.Kill() })
	write(dead, networkFile, bridge+" strait-"+id+"-\n")

	sweepStale(ctx, tmp, slog.New(slog.DiscardHandler))

	for what, done := range map[string]chan struct{}{"the dead mesh's process group": groupDone, "the process in its pod namespace": inNetnsDone} {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("%s still runs after the sweep", what)
		}
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("dead mesh's directory: %v, want removed", err)
	}
	if _, err := os.Stat("/run/netns/" + netnsName); !os.IsNotExist(err) {
		t.Errorf("network namespace %s: %v, want removed", netnsName, err)
	}
	if _, err := os.Stat("/sys/class/net/" + bridge); !os.IsNotExist(err) {
		t.Errorf("bridge %s: %v, want removed", bridge, err)
	}
	for _, d := range []string{live, making} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: %v, want kept", d, err)
		}
	}
	if !running(keepLine) {
		t.Error("the live mesh's process was killed")
	}
}
