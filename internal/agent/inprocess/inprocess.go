// Package inprocess runs strait-proxy inside strait-agent's process: a
// supervisor.Starter whose "process" is the proxy of package proxycmd,
// built from the same command line (-c BOOTSTRAP --concurrency N
// --drain-time-s S) the agent would exec strait-proxy with, and run on
// goroutines of the agent. One process instead of two saves a Go
// runtime, one binary's resident pages and one copy of the protobuf
// runtime's descriptors (bench/README.md, issue #24).
//
// The lifecycle is the exec'd proxy's, signal for signal: SIGTERM (or
// SIGINT) ends the proxy's context, so it drains for up to --drain-time-s
// and stops; Kill makes it quit at once (POST /quitquitquit's path:
// listeners, connections and the ADS stream closed); Wait returns when it
// has stopped, with the error that stopped it (a bootstrap it refuses, an
// admin port in use), and the supervisor restarts it as it would a
// process that exited. What differs is a panic: a goroutine of the proxy
// that panics takes the agent with it, as any Go panic ends its process,
// so a proxy crash is a crash of the sidecar container, which the kubelet
// restarts (the container's restartPolicy), not a restart by the
// supervisor.
package inprocess

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"syscall"

	"github.com/straitmesh/strait/internal/agent/supervisor"
	"github.com/straitmesh/strait/internal/proxy"
	"github.com/straitmesh/strait/internal/proxy/proxycmd"
)

// Starter starts the proxy in this process. Command.Path is not read:
// the proxy is this binary's own strait-proxy code.
type Starter struct {
	// Stderr receives the proxy's log, text at its --log-level, as the
	// exec'd proxy writes it to the stderr it inherits (default
	// os.Stderr).
	Stderr io.Writer
	// OnStart, when set, is called with each proxy once it is built and
	// before it runs (tests).
	OnStart func(*proxy.Proxy)
}

// Start parses c.Args as strait-proxy's command line and starts the
// proxy on a goroutine. A command line it refuses is an error here; a
// bootstrap it cannot load or a port it cannot bind is Wait's error, as
// it is the exit status of an exec'd proxy.
func (s Starter) Start(c supervisor.Command) (supervisor.Process, error) {
	cfg, err := proxycmd.ParseArgs(c.Args)
	if err != nil {
		return nil, fmt.Errorf("strait-proxy command line: %w", err)
	}
	w := s.Stderr
	if w == nil {
		w = os.Stderr
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &process{cancel: cancel, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer cancel()
		p.err = s.run(ctx, cfg, w, p.quit)
	}()
	return p, nil
}

// run builds the proxy and runs it until ctx ends (a drain) or quit is
// closed (at once).
func (s Starter) run(ctx context.Context, cfg proxycmd.Config, w io.Writer, quit <-chan struct{}) error {
	px, err := proxycmd.New(cfg, proxycmd.Options{Logger: cfg.Logger(w), Workers: runtime.GOMAXPROCS(0)}) //nolint:contextcheck // building binds the static listeners, which live until Run ends, not until ctx does
	if err != nil {
		return err
	}
	if s.OnStart != nil {
		s.OnStart(px)
	}
	stopQuit := make(chan struct{})
	defer close(stopQuit)
	go func() {
		select {
		case <-quit:
			px.Quit()
		case <-stopQuit:
		}
	}()
	return px.Run(ctx)
}

// process is one in-process proxy. cancel, quit and done are set at
// creation; err is written by the proxy's goroutine before it closes
// done, and read only after.
type process struct {
	cancel   context.CancelFunc
	quit     chan struct{}
	quitOnce sync.Once
	done     chan struct{}
	err      error
}

// Wait implements supervisor.Process.
func (p *process) Wait() error {
	<-p.done
	return p.err
}

// Signal implements supervisor.Process: SIGTERM and SIGINT start the
// drain, as they do in strait-proxy; no other signal is delivered.
func (p *process) Signal(sig os.Signal) error {
	switch sig {
	case syscall.SIGTERM, syscall.SIGINT:
		p.cancel()
		return nil
	}
	return fmt.Errorf("in-process proxy: signal %v is not delivered (only SIGTERM and SIGINT, which drain it)", sig)
}

// Kill implements supervisor.Process: the proxy quits at once, closing
// its listeners and connections (a drain in progress ends there).
func (p *process) Kill() error {
	p.quitOnce.Do(func() { close(p.quit) })
	return nil
}

var _ supervisor.Starter = Starter{}
