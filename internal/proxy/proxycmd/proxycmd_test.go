package proxycmd

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	cfg, err := ParseArgs([]string{"-c", "/etc/istio/proxy/envoy-rev.json", "--concurrency", "2",
		"--drain-time-s", "45", "--disable-hot-restart", "--parent-shutdown-time-s=60", "--log-level", "warning",
		"--local-address-ip-version", "v4", "--allow-unknown-static-fields", "--drain-strategy", "immediate"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BootstrapPath != "/etc/istio/proxy/envoy-rev.json" || cfg.Concurrency != 2 || cfg.LogLevel != slog.LevelWarn ||
		cfg.DrainTime != 45*time.Second {
		t.Errorf("parsed %+v", cfg)
	}
	if cfg, err := ParseArgs([]string{"-c", "x"}); err != nil || cfg.DrainTime != 600*time.Second {
		t.Errorf("default drain time = %v (%v), want Envoy's 600s", cfg.DrainTime, err)
	}
	for _, bad := range [][]string{{}, {"-c"}, {"-c", "x", "--concurrency", "two"}, {"-c", "x", "--log-level", "loud"},
		{"-c", "x", "--drain-time-s", "-1"}, {"-c", "x", "--drain-time-s", "soon"}, {"-c", "x", "--drain-strategy", "gradual"},
		{"-c", "x", "--drain-strategy=gradual"}} {
		if _, err := ParseArgs(bad); err == nil {
			t.Errorf("ParseArgs(%q) accepted", bad)
		}
	}
}

// TestHTTPCodecFlag: --http-codec keeps accepting the default codec's name,
// and --http-codec nethttp is refused, naming the flag and saying the codec
// was removed.
func TestHTTPCodecFlag(t *testing.T) {
	for _, ok := range [][]string{{"-c", "x", "--http-codec", "strait"}, {"-c", "x", "--http-codec=strait"}} {
		if _, err := ParseArgs(ok); err != nil {
			t.Errorf("ParseArgs(%q): %v", ok, err)
		}
	}
	for _, bad := range [][]string{{"-c", "x", "--http-codec", "nethttp"}, {"-c", "x", "--http-codec=nethttp"}} {
		_, err := ParseArgs(bad)
		if err == nil || !strings.Contains(err.Error(), "--http-codec") || !strings.Contains(err.Error(), "removed") {
			t.Errorf("ParseArgs(%q) = %v, want an error naming --http-codec and saying the codec was removed", bad, err)
		}
	}
}
