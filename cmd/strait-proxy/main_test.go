package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	cfg, err := parseArgs([]string{"-c", "/etc/istio/proxy/envoy-rev.json", "--concurrency", "2",
		"--drain-time-s", "45", "--disable-hot-restart", "--parent-shutdown-time-s=60", "--log-level", "warning",
		"--local-address-ip-version", "v4", "--allow-unknown-static-fields", "--drain-strategy", "immediate"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.bootstrapPath != "/etc/istio/proxy/envoy-rev.json" || cfg.concurrency != 2 || cfg.logLevel != slog.LevelWarn ||
		cfg.drainTime != 45*time.Second {
		t.Errorf("parsed %+v", cfg)
	}
	if cfg, err := parseArgs([]string{"-c", "x"}); err != nil || cfg.drainTime != 600*time.Second {
		t.Errorf("default drain time = %v (%v), want Envoy's 600s", cfg.drainTime, err)
	}
	for _, bad := range [][]string{{}, {"-c"}, {"-c", "x", "--concurrency", "two"}, {"-c", "x", "--log-level", "loud"},
		{"-c", "x", "--drain-time-s", "-1"}, {"-c", "x", "--drain-time-s", "soon"}, {"-c", "x", "--drain-strategy", "gradual"},
		{"-c", "x", "--drain-strategy=gradual"}} {
		if _, err := parseArgs(bad); err == nil {
			t.Errorf("parseArgs(%q) accepted", bad)
		}
	}
}

// TestHTTPCodecFlag: --http-codec keeps accepting the default codec's name,
// and --http-codec nethttp is refused, naming the flag and saying the codec
// was removed.
func TestHTTPCodecFlag(t *testing.T) {
	for _, ok := range [][]string{{"-c", "x", "--http-codec", "strait"}, {"-c", "x", "--http-codec=strait"}} {
		if _, err := parseArgs(ok); err != nil {
			t.Errorf("parseArgs(%q): %v", ok, err)
		}
	}
	for _, bad := range [][]string{{"-c", "x", "--http-codec", "nethttp"}, {"-c", "x", "--http-codec=nethttp"}} {
		_, err := parseArgs(bad)
		if err == nil || !strings.Contains(err.Error(), "--http-codec") || !strings.Contains(err.Error(), "removed") {
			t.Errorf("parseArgs(%q) = %v, want an error naming --http-codec and saying the codec was removed", bad, err)
		}
	}
}
