// Command strait-proxy is Strait's data plane. It is configured like Envoy:
// by a v3 bootstrap file (-c) and ADS.
//
//	strait-proxy -c BOOTSTRAP [--concurrency N] [--log-level info] [--http-codec strait] [--drain-time-s N]
//
// On SIGTERM or SIGINT the proxy fails readiness, drains every listener
// (HTTP/1.1 connections close after their next response, idle ones at once,
// HTTP/2 ones get GOAWAY; listeners keep accepting) and exits once no
// connection has been open for a second or after --drain-time-s seconds
// (default 600, Envoy's).
// POST /quitquitquit on the admin port exits at once.
//
// --cpu-profile FILE writes a Go CPU profile until the proxy exits.
// STRAIT_PROXY_DEBUG_ADDR=127.0.0.1:PORT (loopback only) serves Go's pprof
// profiles and runtime figures there (internal/debugserve; bench/sidecar);
// without it the Go runtime's heap profiling is off.
// --http-codec names the HTTP/1.1 implementation of the request path; only
// strait (the default) remains, so that scripts passing it keep working:
// --http-codec nethttp is refused, saying the net/http codec was removed.
//
// --drain-strategy immediate (Istio's) is the only drain there is;
// gradual is refused. Other Envoy flags the agent may pass
// (--parent-shutdown-time-s, --disable-hot-restart, ...) are accepted and
// ignored: they concern hot restart, which strait-proxy does not do.
//
// strait-agent runs the same proxy in its own process by default
// (internal/proxy/proxycmd, internal/agent/inprocess); this binary is what
// it executes with STRAIT_PROXY_MODE=exec, and what runs stand-alone.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"

	"github.com/straitmesh/strait/internal/debugserve"
	"github.com/straitmesh/strait/internal/proxy/proxycmd"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "strait-proxy:", err)
		os.Exit(1)
	}
}

// run is the process around proxycmd (which strait-agent also runs in its
// own process): the debug server, GOMAXPROCS from --concurrency, the CPU
// profile and the signals.
func run(args []string) error {
	cfg, err := proxycmd.ParseArgs(args)
	if err != nil {
		return err
	}
	log := cfg.Logger(os.Stderr)
	stopDebug, err := debugserve.FromEnv(os.Getenv, "STRAIT_PROXY_DEBUG_ADDR", log) // unset: heap profiling off
	if err != nil {
		return err
	}
	defer stopDebug()
	if cfg.Concurrency > 0 {
		runtime.GOMAXPROCS(cfg.Concurrency)
	}
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return proxycmd.Run(ctx, cfg, proxycmd.Options{Logger: log, Workers: runtime.GOMAXPROCS(0)})
}
