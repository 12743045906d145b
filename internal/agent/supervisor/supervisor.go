// Package supervisor runs the proxy: starts it, restarts it with backoff
// when it exits unexpectedly, and on shutdown drains (reports not-ready
// for a while), sends it SIGTERM and waits for it.
package supervisor

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// ProxyArgs is the proxy's command line: -c BOOTSTRAP --concurrency N
// [--drain-time-s S] (drainTime 0 leaves the flag out).
func ProxyArgs(bootstrapPath string, concurrency int, drainTime time.Duration) []string {
	args := []string{"-c", bootstrapPath, "--concurrency", strconv.Itoa(concurrency)}
	if drainTime > 0 {
		args = append(args, "--drain-time-s", strconv.Itoa(int(drainTime.Round(time.Second)/time.Second)))
	}
	return args
}

// Options configure a Supervisor.
type Options struct {
	Command Command
	// Starter defaults to Exec{} (stdout and stderr passed through).
	Starter Starter
	// OnDrain is called once when shutdown begins, before the drain wait
	// (the agent marks itself not-ready there).
	OnDrain func()
	// DrainDuration is the wait between OnDrain and SIGTERM to the proxy.
	DrainDuration time.Duration
	// TerminateTimeout is how long the proxy gets to exit after SIGTERM
	// before it is killed (default 30s).
	TerminateTimeout time.Duration
	// RestartBackoffBase and RestartBackoffMax bound the delay before a
	// restart (defaults 200ms and 30s). The delay doubles per crash and
	// resets when the proxy ran longer than RestartBackoffMax.
	RestartBackoffBase time.Duration
	RestartBackoffMax  time.Duration
	Logger             *slog.Logger
}

// Supervisor runs one proxy process at a time.
type Supervisor struct {
	opts     Options
	log      *slog.Logger
	restarts atomic.Int64
}

// New returns a Supervisor.
func New(opts Options) *Supervisor {
	if opts.Starter == nil {
		opts.Starter = Exec{}
	}
	if opts.TerminateTimeout <= 0 {
		opts.TerminateTimeout = 30 * time.Second
	}
	if opts.RestartBackoffBase <= 0 {
		opts.RestartBackoffBase = 200 * time.Millisecond
	}
	if opts.RestartBackoffMax <= 0 {
		opts.RestartBackoffMax = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Supervisor{opts: opts, log: opts.Logger.With("component", "supervisor")}
}

// Restarts is how many times the proxy exited unexpectedly and was restarted.
func (s *Supervisor) Restarts() int64 { return s.restarts.Load() }

// Run starts the proxy and keeps it running until ctx is done, then drains
// and stops it and returns nil. It returns an error only if the proxy
// cannot be started the first time (e.g. the binary is missing).
func (s *Supervisor) Run(ctx context.Context) error {
	delay := s.opts.RestartBackoffBase
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			s.drain()
			return nil
		}
		proc, err := s.opts.Starter.Start(s.opts.Command)
		if err != nil {
			if attempt == 0 {
				return fmt.Errorf("start proxy %s: %w", s.opts.Command.Path, err)
			}
			s.log.Error("restart proxy", "path", s.opts.Command.Path, "error", err, "retry_in", delay)
		} else {
			started := time.Now()
			s.log.Info("proxy started", "path", s.opts.Command.Path, "args", s.opts.Command.Args)
			exited := make(chan error, 1)
			go func() { exited <- proc.Wait() }()
			select {
			case <-ctx.Done():
				s.stop(proc, exited)
				return nil
			case err := <-exited:
				if time.Since(started) > s.opts.RestartBackoffMax {
					delay = s.opts.RestartBackoffBase
				}
				s.restarts.Add(1)
				s.log.Error("proxy exited unexpectedly; restarting", "error", exitString(err), "ran", time.Since(started).Round(time.Millisecond), "restart_in", delay)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, s.opts.RestartBackoffMax)
	}
}

func (s *Supervisor) drain() {
	if s.opts.OnDrain != nil {
		s.opts.OnDrain()
	}
}

// stop drains, then asks the proxy to exit and kills it if it does not.
func (s *Supervisor) stop(proc Process, exited <-chan error) {
	s.drain()
	s.log.Info("draining before stopping the proxy", "duration", s.opts.DrainDuration)
	select {
	case err := <-exited:
		s.log.Warn("proxy exited while draining", "error", exitString(err))
		return
	case <-time.After(s.opts.DrainDuration):
	}
	if err := proc.Signal(syscall.SIGTERM); err != nil {
		s.log.Warn("signal proxy", "error", err)
	}
	select {
	case err := <-exited:
		s.log.Info("proxy stopped", "exit", exitString(err))
	case <-time.After(s.opts.TerminateTimeout):
		s.log.Warn("proxy did not exit after SIGTERM; killing it", "waited", s.opts.TerminateTimeout)
		if err := proc.Kill(); err != nil {
			s.log.Warn("kill proxy", "error", err)
		}
		_ = <-exited // the kill's outcome: logged by the wait
	}
}

func exitString(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
