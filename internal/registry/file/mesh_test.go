package file

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/proxypush"
)

// TestSetMeshRebuildsAndPushesEveryone: a new mesh config rebuilds the
// snapshot with it (the root namespace and the outbound traffic policy
// follow) and asks for a global full push.
func TestSetMeshRebuildsAndPushesEveryone(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), seEntry("a", "10.0.0.1"))
	r, err := New(Options{Dir: dir, RootNamespace: "cp", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Snapshot(); s.RootNamespace != "cp" || s.Mesh.RegistryOnly {
		t.Fatalf("before: root %s, REGISTRY_ONLY %v", s.RootNamespace, s.Mesh.RegistryOnly)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pushes := make(chan *proxypush.PushRequest, 16)
	runDone := make(chan error, 1)
	go func() { runDone <- r.Run(ctx, func(p *proxypush.PushRequest) { pushes <- p }) }()
	defer func() { cancel(); _ = <-runDone }()

	m := meshconfig.Default()
	m.RegistryOnly, m.RootNamespace = true, "mesh-root"
	r.SetMesh(m)
	p := waitPush(t, pushes)
	if !p.Full || !p.IsGlobal() {
		t.Errorf("push %+v, want a global full push", p)
	}
	s := r.Snapshot()
	if s.Mesh != m || s.RootNamespace != "mesh-root" || !s.ProxyScope(&proxypush.Proxy{Namespace: "demo"}).RegistryOnly {
		t.Errorf("after SetMesh: mesh %p (want %p), root %s", s.Mesh, m, s.RootNamespace)
	}
	if s.Service("a.demo.svc.cluster.local") == nil {
		t.Error("the rebuilt snapshot lost the configs")
	}
}
