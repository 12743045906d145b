package supervisor

import (
	"io"
	"os"
	"os/exec"
)

// Command is the proxy's command line.
type Command struct {
	Path string
	Args []string
}

// Starter starts the proxy process. Exec is the real one; tests use a fake.
type Starter interface {
	Start(Command) (Process, error)
}

// Process is a started proxy.
type Process interface {
	// Wait blocks until the process exits; it is called exactly once.
	Wait() error
	Signal(os.Signal) error
	Kill() error
}

// Exec starts real processes with os/exec, passing stdout and stderr
// through (default: the agent's own).
type Exec struct {
	Stdout, Stderr io.Writer
}

// Start implements Starter.
func (e Exec) Start(c Command) (Process, error) {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Stdout, cmd.Stderr = e.Stdout, e.Stderr
	if cmd.Stdout == nil {
		cmd.Stdout = os.Stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return execProcess{cmd}, nil
}

type execProcess struct{ cmd *exec.Cmd }

func (p execProcess) Wait() error              { return p.cmd.Wait() }
func (p execProcess) Signal(s os.Signal) error { return p.cmd.Process.Signal(s) }
func (p execProcess) Kill() error              { return p.cmd.Process.Kill() }

var _ Starter = Exec{}
