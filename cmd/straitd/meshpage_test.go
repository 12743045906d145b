package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The mesh page's window must hold two scrapes, or no rate can be
// computed: straitd refuses to start rather than show an empty graph.
func TestRunRefusesMeshWindowBelowTwoScrapes(t *testing.T) {
	for _, f := range []flags{
		{meshScrapeInterval: 10 * time.Second, meshWindow: 15 * time.Second},
		{meshScrapeInterval: -time.Second},
	} {
		f.configDir, f.xdsAddr, f.monitoringAddr, f.logLevel = t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", "info"
		err := run(context.Background(), f, func(string) (string, bool) { return "", false })
		if err == nil || !strings.Contains(err.Error(), "--mesh-window") {
			t.Errorf("interval %s, window %s: %v, want a refusal naming the flags", f.meshScrapeInterval, f.meshWindow, err)
		}
	}
}
