package meshconfig

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWatchAppliesChangesAndKeepsTheLastGood: a changed file is applied; a
// file with a refused field is not, and the next good one is.
func TestWatchAppliesChangesAndKeepsTheLastGood(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh")
	write := func(s string) {
		t.Helper()
		// Replaced by a rename, as editors and ConfigMap volumes do.
		if err := os.WriteFile(path+".tmp", []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write("outboundTrafficPolicy:\n  mode: ALLOW_ANY\n")
	first, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Config, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Watch(ctx, path, first, func(c *Config) { got <- c }, slog.New(slog.DiscardHandler)) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	next := func() *Config {
		t.Helper()
		select {
		case c := <-got:
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("no config applied")
		}
		return nil
	}
	// Written before or after the watch is set up, the change is seen.
	write("outboundTrafficPolicy:\n  mode: REGISTRY_ONLY\n")
	if c := next(); !c.RegistryOnly {
		t.Fatalf("applied %+v, want REGISTRY_ONLY", c)
	}
	write("enableTracing: true\n")
	write("outboundTrafficPolicy:\n  mode: REGISTRY_ONLY\nrootNamespace: root\n")
	if c := next(); c.RootNamespace != "root" || !c.RegistryOnly {
		t.Fatalf("applied %+v, want the good file after the refused one", c)
	}
	select {
	case c := <-got:
		t.Fatalf("applied %+v as well", c)
	default:
	}
}

// TestWatchSkipsUnchangedContent: rewriting the file with what is applied
// already calls nothing.
func TestWatchSkipsUnchangedContent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh")
	content := []byte("outboundTrafficPolicy:\n  mode: REGISTRY_ONLY\n")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	applied, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Config, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Watch(ctx, path, applied, func(c *Config) { got <- c }, slog.New(slog.DiscardHandler)) }()
	// Rewritten by a rename: Watch reads the file once when it starts,
	// and an in-place rewrite could show it an empty file in between.
	if err := os.WriteFile(path+".tmp", content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-got:
		t.Errorf("unchanged content applied again: %+v", c)
	case <-time.After(5 * settleWindow):
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}
