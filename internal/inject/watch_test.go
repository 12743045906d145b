package inject

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The injector follows its config directory: new values are applied
// without a restart, and a broken file keeps the previous settings.
func TestWatchDir(t *testing.T) {
	dir := t.TempDir()
	if HasConfigFiles(dir) {
		t.Fatal("empty dir has config files")
	}
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name+".tmp"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, name+".tmp"), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write(ValuesFileName, "global:\n  tag: one\n")
	if !HasConfigFiles(dir) {
		t.Fatal("HasConfigFiles is false with a values file")
	}
	inj := New(nil, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &syncBuffer{}
	go func() { done <- WatchDir(ctx, dir, inj, nil, slog.New(slog.NewTextHandler(logs, nil))) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitTag := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for inj.Settings().Values.String("global.tag") != want {
			if time.Now().After(deadline) {
				t.Fatalf("tag is %q, want %q", inj.Settings().Values.String("global.tag"), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitTag("one")
	write(ValuesFileName, "global:\n  tag: two\n")
	waitTag("two")
	write(ConfigFileName, "policy: sometimes\n")
	write(ValuesFileName, "global:\n  tag: three\n")
	// The broken config keeps everything as it was (once it was read:
	// the watcher says so)...
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "injector config not applied"); {
		if time.Now().After(deadline) {
			t.Fatalf("the broken config was not reported:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := inj.Settings().Values.String("global.tag"); got != "two" {
		t.Fatalf("broken config applied: tag %q", got)
	}
	// ...until it is fixed.
	write(ConfigFileName, "policy: disabled\n")
	waitTag("three")
	if p := inj.Settings().Config.Policy; p != PolicyDisabled {
		t.Fatalf("policy %q", p)
	}
	// What happened went to the logger it was given, tagged as its own.
	for _, want := range []string{
		`msg="injector config reloaded" component=inject-config dir=` + dir,
		`msg="injector config not applied; keeping the previous one" component=inject-config dir=` + dir,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log does not hold %q:\n%s", want, logs.String())
		}
	}
}

// syncBuffer is a bytes.Buffer for a logger used from another goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestSettingsFromConfigMap(t *testing.T) {
	s, err := SettingsFromConfigMap(map[string]string{
		"config": "policy: disabled\n",
		"values": `{"global":{"hub":"example.org/mesh"}}`,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Config.Policy != PolicyDisabled || s.Values.String("global.hub") != "example.org/mesh" || s.Values.String("global.tag") != "latest" {
		t.Fatalf("settings: %+v %v", s.Config, s.Values)
	}
	if _, err := SettingsFromConfigMap(map[string]string{"config": "templates: {sidecar: '{{ .Nope'}"}, nil); err == nil {
		t.Fatal("a template that does not parse was accepted")
	}
}

func TestParseConfigMapManifests(t *testing.T) {
	cfg, err := ParseConfig([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio-sidecar-injector}\ndata:\n  config: 'policy: disabled'\n  values: '{\"global\":{\"tag\":\"x\"}}'\n"))
	if err != nil || cfg.Policy != PolicyDisabled {
		t.Fatalf("config: %+v %v", cfg, err)
	}
	m, err := ParseMeshConfig([]byte("kind: ConfigMap\ndata:\n  mesh: 'trustDomain: example.org'\n"))
	if err != nil || m.GetTrustDomain() != "example.org" {
		t.Fatalf("mesh: %v %v", m, err)
	}
	if _, err := ParseMeshConfig([]byte("trustDomian: x")); err == nil {
		t.Fatal("misspelt mesh field accepted")
	}
}

// TestLoadDir: each file is optional, a bad one is an error naming it, and
// a file that cannot be read (here: a directory) is an error too.
func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	if HasConfigFiles(dir) {
		t.Fatal("an empty directory has config files")
	}
	s, err := LoadDir(dir, nil)
	if err != nil || s.Config.Policy != PolicyEnabled || s.Values.String("global.proxy.image") == "" {
		t.Fatalf("empty dir: %v", err)
	}
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(ValuesFileName, "global: {hub: h}\n")
	if !HasConfigFiles(dir) {
		t.Fatal("values file not seen")
	}
	if s, err = LoadDir(dir, nil); err != nil || s.Values.String("global.hub") != "h" {
		t.Fatalf("values only: %v", err)
	}
	write(ConfigFileName, "policy: disabled\n")
	if s, err = LoadDir(dir, nil); err != nil || s.Config.Policy != PolicyDisabled || s.Values.String("global.hub") != "h" {
		t.Fatalf("both: %v", err)
	}
	write(ValuesFileName, "- 1\n")
	if _, err = LoadDir(dir, nil); err == nil || !strings.HasPrefix(err.Error(), filepath.Join(dir, ValuesFileName)+": ") {
		t.Fatalf("bad values: %v", err)
	}
	write(ConfigFileName, "polcy: x\n")
	if _, err = LoadDir(dir, nil); err == nil || !strings.HasPrefix(err.Error(), filepath.Join(dir, ConfigFileName)+": ") {
		t.Fatalf("bad config: %v", err)
	}
	for _, name := range []string{ConfigFileName, ValuesFileName} {
		d := t.TempDir()
		if err := os.Mkdir(filepath.Join(d, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadDir(d, nil); err == nil {
			t.Errorf("%s is a directory, but LoadDir did not fail", name)
		}
	}
}
