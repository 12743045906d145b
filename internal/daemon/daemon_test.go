package daemon

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStartStop(t *testing.T) {
	log := filepath.Join(t.TempDir(), "d.log")
	// A daemon with a child of its own in its group, that ignores SIGTERM:
	// Stop must end both, with SIGKILL after the grace.
	p, err := Start("stubborn", "sh", []string{"-c", `trap "" TERM; for i in 1 2 3 4 5; do echo line$i; done; sleep 60 & wait`}, log)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.LogTail(10), "line5") {
		if time.Now().After(deadline) {
			t.Fatalf("log %q", p.LogTail(10))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := p.LogTail(2); got != "line4\nline5" {
		t.Errorf("LogTail(2) = %q", got)
	}
	if err := p.CheckRunning(); err != nil || p.Exited() {
		t.Fatalf("running daemon: %v, exited %v", err, p.Exited())
	}
	p.Stop(200 * time.Millisecond)
	if !p.Exited() {
		t.Fatal("Stop returned with the process running")
	}
	// The group's orphaned child is killed too; it may stay a zombie
	// until its new parent reaps it.
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(-p.Pid(), 0) != syscall.ESRCH; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the process group survived Stop")
		}
	}
	err = p.CheckRunning()
	if err == nil || !strings.Contains(err.Error(), "stubborn exited") || !strings.Contains(err.Error(), "line5") {
		t.Errorf("CheckRunning after Stop = %v; want the name and the log's tail", err)
	}
	p.Stop(time.Second) // a second Stop is a no-op
	var nilP *Process
	nilP.Stop(time.Second)
}

func TestExitStatus(t *testing.T) {
	dir := t.TempDir()
	ok, err := Start("ok", "true", nil, filepath.Join(dir, "ok.log"))
	if err != nil {
		t.Fatal(err)
	}
	bad, err := Start("bad", "sh", []string{"-c", "echo boom; exit 3"}, filepath.Join(dir, "bad.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Process{ok, bad} {
		<-p.done
	}
	if ok.ExitError().Error() != "exited" {
		t.Errorf("status 0: %v", ok.ExitError())
	}
	if e := bad.ExitError(); e == nil || !strings.Contains(e.Error(), "exit status 3") {
		t.Errorf("status 3: %v", e)
	}
	if _, err := Start("missing", filepath.Join(dir, "no-such-binary"), nil, filepath.Join(dir, "m.log")); err == nil || !strings.Contains(err.Error(), "start missing") {
		t.Errorf("missing binary: %v", err)
	}
}
