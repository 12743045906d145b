// Package daemon runs the child daemons of the test environments (etcd,
// kube-apiserver, containerd, the kubelet...): each in its own process
// group with its output appended to a log file, killed when the test
// process dies, stopped with SIGTERM then SIGKILL.
package daemon

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Process is one running child daemon.
type Process struct {
	// Name names the daemon in errors ("kube-apiserver").
	Name string
	// LogPath is the file its stdout and stderr are appended to.
	LogPath string

	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // the exit status; read after done
}

// Start starts bin with args, output appended to logPath. The child gets
// its own process group and SIGKILL when this process dies (Pdeathsig),
// so an aborted test leaves no daemon behind.
func Start(name, bin string, args []string, logPath string) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process's (and its group's) id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitError is how an ended process ended ("exited" for status 0).
func (p *Process) ExitError() error {
	if p.err == nil {
		return errors.New("exited")
	}
	return p.err
}

// Stop sends SIGTERM to the process group, SIGKILL after grace, and waits
// for the process to end. A nil or ended process is left alone.
func (p *Process) Stop(grace time.Duration) {
	if p == nil || p.Exited() {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
}

// CheckRunning returns an error with the log's tail if p has exited.
func (p *Process) CheckRunning() error {
	if !p.Exited() {
		return nil
	}
	return fmt.Errorf("%s exited (%w); log %s:\n%s", p.Name, p.ExitError(), p.LogPath, p.LogTail(25))
}

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string { return FileTail(p.LogPath, n) }

// FileTail returns the last n lines of the file at path, "" if unreadable.
func FileTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
