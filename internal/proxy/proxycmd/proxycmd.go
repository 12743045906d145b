// Package proxycmd is strait-proxy's command without its process: the
// Envoy-style command line (-c BOOTSTRAP, --concurrency, --drain-time-s,
// ...) parsed into a Config, and the proxy that Config describes, built
// and run until its context ends. cmd/strait-proxy wraps it in a process
// (signals, GOMAXPROCS, a CPU profile, the debug server); strait-agent
// runs it in its own process (internal/agent/inprocess), from the same
// command line it would exec strait-proxy with.
package proxycmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/straitmesh/strait/internal/proxy"
	"github.com/straitmesh/strait/internal/proxy/bootstrap"
	"github.com/straitmesh/strait/internal/proxy/hcm"
)

// Usage is the command line's synopsis.
const Usage = "usage: strait-proxy -c BOOTSTRAP [--concurrency N] [--log-level LEVEL] [--http-codec strait] [--drain-time-s N]"

// DefaultDrainTime is Envoy's --drain-time-s default.
const DefaultDrainTime = 600 * time.Second

// Config is the parsed command line.
type Config struct {
	BootstrapPath string
	// Concurrency is --concurrency: accept workers per listener; 0 is one
	// per core (GOMAXPROCS).
	Concurrency int
	LogLevel    slog.Level
	HTTPCodec   hcm.Codec
	// CPUProfile is --cpu-profile: the process writes a Go CPU profile
	// there until it exits (cmd/strait-proxy only).
	CPUProfile string
	// DrainTime is --drain-time-s: how long a SIGTERM drain may last.
	DrainTime time.Duration
}

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

// ParseArgs parses strait-proxy's command line (without the program
// name). Envoy flags it does not act on are accepted and skipped, with
// their values.
func ParseArgs(args []string) (Config, error) {
	cfg := Config{LogLevel: slog.LevelInfo, DrainTime: DefaultDrainTime}
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
			cfg.BootstrapPath = v
		case "concurrency":
			v, err := takeValue()
			if err != nil {
				return cfg, err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return cfg, fmt.Errorf("--concurrency %q is not a non-negative integer", v)
			}
			cfg.Concurrency = n
		case "l", "log-level":
			v, err := takeValue()
			if err != nil {
				return cfg, err
			}
			lvl, err := parseLevel(v)
			if err != nil {
				return cfg, err
			}
			cfg.LogLevel = lvl
		case "http-codec":
			v, err := takeValue()
			if err != nil {
				return cfg, err
			}
			c, err := hcm.ParseCodec(v)
			if err != nil {
				return cfg, fmt.Errorf("--http-codec: %w", err)
			}
			cfg.HTTPCodec = c
		case "drain-time-s":
			v, err := takeValue()
			if err != nil {
				return cfg, err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return cfg, fmt.Errorf("--drain-time-s %q is not a non-negative number of seconds", v)
			}
			cfg.DrainTime = time.Duration(n) * time.Second
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
			cfg.CPUProfile = v
		case "h", "help":
			return cfg, errors.New(Usage)
		default:
			// An Envoy flag we don't act on: skip it and its value.
			if !hasValue && !envoyBoolFlags[name] && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
			}
		}
	}
	if cfg.BootstrapPath == "" {
		return cfg, errors.New("-c BOOTSTRAP is required")
	}
	return cfg, nil
}

// Logger is the proxy's logger as strait-proxy makes it: text on w, at
// the command line's --log-level.
func (c Config) Logger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: c.LogLevel}))
}

// Options are what the process running the proxy decides.
type Options struct {
	// Logger is the proxy's (nil: discard).
	Logger *slog.Logger
	// Workers is the accept workers per listener when --concurrency is 0
	// (the process's GOMAXPROCS; at least 1).
	Workers int
}

// New loads the bootstrap and builds the proxy, binding its static
// listeners; (*proxy.Proxy).Run then runs it until its context ends
// (a drain of up to --drain-time-s) or Quit.
func New(cfg Config, opts Options) (*proxy.Proxy, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b, err := bootstrap.Load(cfg.BootstrapPath)
	if err != nil {
		return nil, err
	}
	workers := cfg.Concurrency
	if workers == 0 {
		workers = max(1, opts.Workers)
	}
	p, err := proxy.New(proxy.Options{Bootstrap: b, Concurrency: workers, Logger: log, HTTPCodec: cfg.HTTPCodec, DrainTime: cfg.DrainTime})
	if err != nil {
		return nil, err
	}
	log.Info("starting", "component", "main", "node", b.GetNode().GetId(), "concurrency", workers,
		"http_codec", string(cfg.HTTPCodec), "drain_time", cfg.DrainTime)
	return p, nil
}

// Run builds the proxy (New) and runs it until ctx ends, then drains for
// up to --drain-time-s, or until POST /quitquitquit; it returns when the
// proxy has stopped.
func Run(ctx context.Context, cfg Config, opts Options) error {
	p, err := New(cfg, opts) //nolint:contextcheck // building binds the static listeners, which live until Run ends, not until ctx does
	if err != nil {
		return err
	}
	return p.Run(ctx)
}
