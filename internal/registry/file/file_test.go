package file

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/proxypush"
)

func readDemo(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "demo", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitPush waits for one push, failing after a bounded time.
func waitPush(t *testing.T, ch <-chan *proxypush.PushRequest) *proxypush.PushRequest {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no push within 5s")
		return nil
	}
}

func expectNoPush(t *testing.T, ch <-chan *proxypush.PushRequest) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("unexpected push %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
}

func vsKey() proxypush.ConfigKey {
	return proxypush.ConfigKey{Kind: istioconfig.KindVirtualService, Name: "echo", Namespace: "demo"}
}

func TestRegistryLifecycle(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "mesh.yaml"), readDemo(t, "mesh.yaml"))
	write(t, filepath.Join(dir, "notes.txt"), "not yaml")
	r, err := New(Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	snap := r.Snapshot()
	if len(snap.Services) != 1 || len(snap.Services[0].Endpoints) != 2 {
		t.Fatalf("initial snapshot: %d services", len(snap.Services))
	}
	if err := r.ResolveProxy(&proxypush.Proxy{ID: "x", IP: "10.99.0.10"}); err != nil {
		t.Fatal(err)
	}
	if err := r.ResolveProxy(&proxypush.Proxy{ID: "x", IP: "10.1.1.1"}); err == nil || !strings.Contains(err.Error(), "10.1.1.1") {
		t.Fatalf("ResolveProxy unknown IP: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	pushes := make(chan *proxypush.PushRequest, 16)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, func(p *proxypush.PushRequest) { pushes <- p }) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Run did not return")
		}
	}()

	routing := filepath.Join(dir, "routing.yaml")
	good := readDemo(t, "destinationrule.yaml") + "---\n" + readDemo(t, "virtualservice.yaml")

	// Create.
	write(t, routing, good)
	p := waitPush(t, pushes)
	if !p.Full || len(p.ConfigsUpdated) != 2 || p.Start.IsZero() || p.Reason[0] != proxypush.ConfigUpdate {
		t.Fatalf("push after create = %+v", p)
	}
	if r.Snapshot().DestinationRule("echo.demo.svc.cluster.local") == nil {
		t.Fatal("DestinationRule not in snapshot")
	}

	// A broken edit keeps the last good content and pushes nothing.
	write(t, routing, strings.Replace(good, "weight: 20", "weight: -20", 1))
	expectNoPush(t, pushes)
	if vs := r.Snapshot().Configs.Get(vsKey()); vs == nil || vs.VirtualService().Http[0].Route[1].Weight != 20 {
		t.Fatal("last good VirtualService not kept")
	}

	// Fixing the file applies it.
	write(t, routing, strings.NewReplacer("weight: 80", "weight: 50", "weight: 20", "weight: 50").Replace(good))
	p = waitPush(t, pushes)
	if _, ok := p.ConfigsUpdated[vsKey()]; !ok || len(p.ConfigsUpdated) != 1 {
		t.Fatalf("push after fix = %+v", p.ConfigsUpdated)
	}

	// An editor's write-to-temp-then-rename.
	tmp := filepath.Join(dir, ".routing.yaml.tmp")
	write(t, tmp, good)
	if err := os.Rename(tmp, routing); err != nil {
		t.Fatal(err)
	}
	p = waitPush(t, pushes)
	if _, ok := p.ConfigsUpdated[vsKey()]; !ok {
		t.Fatalf("push after rename = %+v", p.ConfigsUpdated)
	}
	if w := r.Snapshot().Configs.Get(vsKey()).VirtualService().Http[0].Route[0].Weight; w != 80 {
		t.Fatalf("weight after rename = %d", w)
	}

	// Rewriting identical content pushes nothing.
	write(t, routing, good)
	expectNoPush(t, pushes)

	// Delete.
	if err := os.Remove(routing); err != nil {
		t.Fatal(err)
	}
	p = waitPush(t, pushes)
	if len(p.ConfigsUpdated) != 2 {
		t.Fatalf("push after delete = %+v", p.ConfigsUpdated)
	}
	if r.Snapshot().Configs.Get(vsKey()) != nil {
		t.Fatal("deleted VirtualService still served")
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(Options{Dir: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Fatal("missing dir: no error")
	}
	f := filepath.Join(t.TempDir(), "f.yaml")
	write(t, f, "")
	if _, err := New(Options{Dir: f}); err == nil {
		t.Fatal("file as dir: no error")
	}
}

func TestInitialInvalidDocumentsSkipped(t *testing.T) {
	dir := t.TempDir()
	bad := strings.Replace(readDemo(t, "mesh.yaml"), "address: 10.99.0.12", "address: not-an-ip", 1)
	write(t, filepath.Join(dir, "mesh.yaml"), bad)
	r, err := New(Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.Snapshot().Configs.List(istioconfig.KindWorkloadEntry)); n != 2 {
		t.Fatalf("want the 2 valid WorkloadEntries, got %d", n)
	}
}

// A file whose ServiceEntry changes only its inline endpoints gives an
// endpoints-only push and a snapshot in which the other services are the
// same objects.
func TestEndpointsOnlyChange(t *testing.T) {
	dir := t.TempDir()
	entry := func(name, addr string) string {
		return "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: " + name + ", namespace: demo}\n" +
			"spec:\n  hosts: [" + name + ".demo.svc.cluster.local]\n  ports: [{number: 80, name: http}]\n  resolution: STATIC\n  endpoints: [{address: " + addr + "}]\n"
	}
	write(t, filepath.Join(dir, "a.yaml"), entry("a", "10.0.0.1"))
	write(t, filepath.Join(dir, "b.yaml"), entry("b", "10.0.0.2"))
	r, err := New(Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	before := r.Snapshot()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pushes := make(chan *proxypush.PushRequest, 16)
	go func() { _ = r.Run(ctx, func(p *proxypush.PushRequest) { pushes <- p }) }()

	// Atomically, as editors and ConfigMap mounts do: a truncated file in
	// between would be a removal.
	write(t, filepath.Join(dir, ".b.tmp"), entry("b", "10.0.0.3"))
	if err := os.Rename(filepath.Join(dir, ".b.tmp"), filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	p := waitPush(t, pushes)
	if p.Full || p.Reason[0] != proxypush.EndpointUpdate {
		t.Fatalf("push = %+v, want endpoints only", p)
	}
	if _, ok := p.ServicesUpdated["b.demo.svc.cluster.local"]; !ok || len(p.ServicesUpdated) != 1 {
		t.Errorf("ServicesUpdated = %v, want b only", p.ServicesUpdated)
	}
	after := r.Snapshot()
	if after.Version <= before.Version {
		t.Errorf("version %d → %d", before.Version, after.Version)
	}
	if after.Service("a.demo.svc.cluster.local") != before.Service("a.demo.svc.cluster.local") {
		t.Error("the unchanged service a was rebuilt")
	}
	if got := after.Service("b.demo.svc.cluster.local").Endpoints[0].Address; got != "10.0.0.3" {
		t.Errorf("b's endpoint = %s, want 10.0.0.3", got)
	}
}

// A ConfigMap volume updates its files by swapping the hidden ..data
// symlink; the visible files are symlinks through it and get no event of
// their own. The registry must still see the new content.
func TestConfigMapSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	entry := func(addr string) string {
		return "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: a, namespace: demo}\n" +
			"spec:\n  hosts: [a.demo.svc.cluster.local]\n  ports: [{number: 80, name: http}]\n  resolution: STATIC\n  endpoints: [{address: " + addr + "}]\n"
	}
	version := func(name, addr string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, name, "mesh.yaml"), entry(addr))
	}
	version("..v1", "10.0.0.1")
	if err := os.Symlink("..v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "mesh.yaml"), filepath.Join(dir, "mesh.yaml")); err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Snapshot().Service("a.demo.svc.cluster.local").Endpoints[0].Address; got != "10.0.0.1" {
		t.Fatalf("initial endpoint %s", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pushes := make(chan *proxypush.PushRequest, 16)
	go func() { _ = r.Run(ctx, func(p *proxypush.PushRequest) { pushes <- p }) }()

	version("..v2", "10.0.0.2")
	if err := os.Symlink("..v2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	waitPush(t, pushes)
	if got := r.Snapshot().Service("a.demo.svc.cluster.local").Endpoints[0].Address; got != "10.0.0.2" {
		t.Fatalf("after the swap, endpoint %s, want 10.0.0.2", got)
	}
}

// seEntry is a one-endpoint ServiceEntry named name.
func seEntry(name, addr string) string {
	return "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: " + name + ", namespace: demo}\n" +
		"spec:\n  hosts: [" + name + ".demo.svc.cluster.local]\n  ports: [{number: 80, name: http}]\n  resolution: STATIC\n  endpoints: [{address: " + addr + "}]\n"
}

// A file rewritten in place (truncated, then written, as os.WriteFile
// does) is empty for a moment. Reading it then must not withdraw its
// services: the empty file keeps its configs until it stays empty for
// emptyGrace.
func TestTruncatedFileKeepsItsServices(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	write(t, path, seEntry("a", "10.0.0.1"))
	r, err := New(Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	const host = "a.demo.svc.cluster.local"
	var pushes []*proxypush.PushRequest
	onChange := func(p *proxypush.PushRequest) {
		if r.Snapshot().Service(host) == nil {
			t.Errorf("push %+v withdrew %s", p, host)
		}
		pushes = append(pushes, p)
	}

	write(t, path, "")
	r.apply(time.Now(), map[string]bool{path: true}, onChange)
	if len(pushes) != 0 || r.Snapshot().Service(host) == nil {
		t.Fatalf("the truncated file was applied: %d pushes, service %v", len(pushes), r.Snapshot().Service(host))
	}
	write(t, path, seEntry("a", "10.0.0.2"))
	r.apply(time.Now(), map[string]bool{path: true}, onChange)
	if len(pushes) != 1 {
		t.Fatalf("%d pushes after the rewrite, want 1", len(pushes))
	}
	if got := r.Snapshot().Service(host).Endpoints[0].Address; got != "10.0.0.2" {
		t.Errorf("endpoint = %s, want the rewritten 10.0.0.2", got)
	}
	if _, ok := r.nextEmptyCheck(); ok {
		t.Error("a file still waits for its emptiness to be confirmed")
	}

	// A file that does not parse keeps its last good content too.
	write(t, path, "kind: [")
	r.apply(time.Now(), map[string]bool{path: true}, onChange)
	if len(pushes) != 1 || r.Snapshot().Service(host).Endpoints[0].Address != "10.0.0.2" {
		t.Errorf("a broken file changed the configs: %d pushes", len(pushes))
	}
}

// A file that stays empty past emptyGrace is empty: its services go.
func TestEmptyFileRemovesItsServicesAfterGrace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	write(t, path, seEntry("a", "10.0.0.1"))
	r, err := New(Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	write(t, path, "\n")
	t0 := time.Now()
	if changed, err := r.reloadPaths(t0, map[string]bool{path: true}); err != nil || len(changed) != 0 {
		t.Fatalf("first empty read: changed %v, %v; want nothing yet", changed, err)
	}
	if at, ok := r.nextEmptyCheck(); !ok || !at.Equal(t0.Add(emptyGrace)) {
		t.Fatalf("next empty check = %v, %v; want %v", at, ok, t0.Add(emptyGrace))
	}
	if changed, _ := r.reloadPaths(t0.Add(emptyGrace-time.Millisecond), map[string]bool{path: true}); len(changed) != 0 {
		t.Fatalf("empty read within the grace period changed %v", changed)
	}
	changed, err := r.reloadPaths(t0.Add(emptyGrace), map[string]bool{path: true})
	if err != nil || len(changed) != 1 || r.Snapshot().Service("a.demo.svc.cluster.local") != nil {
		t.Fatalf("empty past the grace period: changed %v, %v; want the ServiceEntry removed", changed, err)
	}
}

// The same through the watcher: a non-atomic rewrite, with a pause after
// the truncation longer than the settle window, never pushes a snapshot
// without the file's service.
func TestWatchedNonAtomicRewrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	write(t, path, seEntry("a", "10.0.0.1"))
	r, err := New(Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type seen struct {
		p    *proxypush.PushRequest
		addr string // a's endpoint in the pushed snapshot, "" if a is gone
	}
	pushes := make(chan seen, 16)
	runDone := make(chan error, 1)
	go func() {
		runDone <- r.Run(ctx, func(p *proxypush.PushRequest) {
			s := seen{p: p}
			if svc := r.Snapshot().Service("a.demo.svc.cluster.local"); svc != nil && len(svc.Endpoints) > 0 {
				s.addr = svc.Endpoints[0].Address
			}
			pushes <- s
		})
	}()
	defer func() { cancel(); _ = <-runDone }()

	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * settleWindow) // the truncated file settles and is read
	if _, err := f.WriteString(seEntry("a", "10.0.0.2")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case s := <-pushes:
			if s.addr == "" {
				t.Fatalf("push %+v withdrew the service", s.p)
			}
			if s.addr == "10.0.0.2" {
				return
			}
		case <-deadline:
			t.Fatal("no push with the rewritten endpoint within 5s")
		}
	}
}

// Through the watcher, a file emptied for good loses its services once
// emptyGrace has passed.
func TestWatchedEmptiedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	write(t, path, seEntry("a", "10.0.0.1"))
	r, err := New(Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pushes := make(chan *proxypush.PushRequest, 16)
	runDone := make(chan error, 1)
	go func() { runDone <- r.Run(ctx, func(p *proxypush.PushRequest) { pushes <- p }) }()
	defer func() { cancel(); _ = <-runDone }()

	write(t, path, "")
	p := waitPush(t, pushes)
	if _, ok := p.ServicesUpdated["a.demo.svc.cluster.local"]; !ok || r.Snapshot().Service("a.demo.svc.cluster.local") != nil {
		t.Fatalf("push %+v: want a.demo.svc.cluster.local removed", p)
	}
}
