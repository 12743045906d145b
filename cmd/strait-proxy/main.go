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
// profiles and runtime figures there (internal/debugserve; bench/sidecar).
// --http-codec names the HTTP/1.1 implementation of the request path; only
// strait (the default) remains, so that scripts passing it keep working:
// --http-codec nethttp is refused, saying the net/http codec was removed.
//
// --drain-strategy immediate (Istio's) is the only drain there is;
// gradual is refused. Other Envoy flags the agent may pass
// (--parent-shutdown-time-s, --disable-hot-restart, ...) are accepted and
// ignored: they concern hot restart, which strait-proxy does not do.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/straitmesh/strait/internal/debugserve"
	"github.com/straitmesh/strait/internal/proxy"
	"github.com/straitmesh/strait/internal/proxy/bootstrap"
	"github.com/straitmesh/strait/internal/proxy/hcm"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "strait-proxy:", err)
		os.Exit(1)
	}
}

// config is the parsed command line.
type config struct {
	bootstrapPath string
	concurrency   int
	logLevel      slog.Level
	httpCodec     hcm.Codec
	cpuProfile    string // write a CPU profile here until exit
	drainTime     time.Duration
	debugAddr     string // STRAIT_PROXY_DEBUG_ADDR: pprof and runtime figures on loopback
}

// defaultDrainTime is Envoy's --drain-time-s default.
const defaultDrainTime = 600 * time.Second

// envoyBoolFlags are Envoy flags that take no value.
var envoyBoolFlags = map[string]bool{
	"disable-hot-restart":            true,
	"allow-unknown-static-fields":    true,
	"reject-unknown-dynamic-fields":  true,
	"ignore-unknown-dynamic-fields":  true,
	"use-dynamic-base-id":            true,
	"disable-extensions":             false,
	"enable-fine-grain-logging":      true,
	"enable-core-dump":               true,
	"skip-hot-restart-on-no-parent":  true,
	"skip-hot-restart-parent-stats":  true,
	"cpuset-threads":                 true,
	"log-format-escaped":             true,
	"mode-validate":                  false,
	"enable-mutex-tracing":           true,
	"restart-epoch-from-environment": true,
}

func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "trace", "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error", "critical", "off":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("--log-level %q is not one of trace, debug, info, warning, error, critical, off", s)
}

func parseArgs(args []string) (config, error) {
	cfg := config{logLevel: slog.LevelInfo, drainTime: defaultDrainTime}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return cfg, fmt.Errorf("unexpected argument %q", a)
		}
		name := strings.TrimLeft(a, "-")
		value, hasValue := "", false
		if k, v, ok := strings.Cut(name, "="); ok {
			name, value, hasValue = k, v, true
		}
		takeValue := func() (string, error) {
			if hasValue {
				return value, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("flag %s needs a value", a)
			}
			i++
			return args[i], nil
		}
		switch name {
		case "c", "config-path":
			v, err := takeValue()
			if err != nil {
				return cfg, err
			}
			cfg.bootstrapPath = v
		case "concurrency":
			v, err := takeValue()
			if err != nil {
				return cfg, err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return cfg, fmt.Errorf("--concurrency %q is not a non-negative integer", v)
			}
			cfg.concurrency = n
		case "l", "log-level":
			v, err := takeValue()
			if err != nil {
				return cfg, err
			}
			lvl, err := parseLevel(v)
			if err != nil {
				return cfg, err
			}
			cfg.logLevel = lvl
		case "http-codec":
			v, err := takeValue()
			if err != nil {
				return cfg, err
			}
			c, err := hcm.ParseCodec(v)
			if err != nil {
				return cfg, fmt.Errorf("--http-codec: %w", err)
			}
			cfg.httpCodec = c
		case "drain-time-s":
			v, err := takeValue()
			if err != nil {
				return cfg, err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return cfg, fmt.Errorf("--drain-time-s %q is not a non-negative number of seconds", v)
			}
			cfg.drainTime = time.Duration(n) * time.Second
		case "drain-strategy":
			v, err := takeValue()
			if err != nil {
				return cfg, err
			}
			if v != "immediate" {
				return cfg, fmt.Errorf("--drain-strategy %q is not supported (want immediate: connections are asked to close at once, not gradually)", v)
			}
		case "cpu-profile":
			v, err := takeValue()
			if err != nil {
				return cfg, err
			}
			cfg.cpuProfile = v
		case "h", "help":
			return cfg, errors.New("usage: strait-proxy -c BOOTSTRAP [--concurrency N] [--log-level LEVEL] [--http-codec strait] [--drain-time-s N]")
		default:
			// An Envoy flag we don't act on: skip it and its value.
			if !hasValue && !envoyBoolFlags[name] && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
			}
		}
	}
	if cfg.bootstrapPath == "" {
		return cfg, errors.New("-c BOOTSTRAP is required")
	}
	return cfg, nil
}

func run(args []string) error {
	cfg, err := parseArgs(args)
	if err != nil {
		return err
	}
	cfg.debugAddr = os.Getenv("STRAIT_PROXY_DEBUG_ADDR")
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	if cfg.debugAddr != "" {
		lis, err := debugserve.Listen(cfg.debugAddr)
		if err != nil {
			return fmt.Errorf("STRAIT_PROXY_DEBUG_ADDR: %w", err)
		}
		defer debugserve.Start(lis, log).Close()
	}
	if cfg.concurrency > 0 {
		runtime.GOMAXPROCS(cfg.concurrency)
	}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	b, err := bootstrap.Load(cfg.bootstrapPath)
	if err != nil {
		return err
	}
	workers := cfg.concurrency
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	p, err := proxy.New(proxy.Options{Bootstrap: b, Concurrency: workers, Logger: log, HTTPCodec: cfg.httpCodec, DrainTime: cfg.drainTime})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Info("starting", "component", "main", "node", b.GetNode().GetId(), "concurrency", workers, "http_codec", string(cfg.httpCodec), "drain_time", cfg.drainTime)
	return p.Run(ctx)
}
