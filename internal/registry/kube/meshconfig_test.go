package kube

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/proxypush"
)

// TestMeshConfigMap: the istio ConfigMap's mesh key is read at start
// (defaults when it is missing), a change is applied to the registry (its
// snapshot's mesh config, and a full push), a change with a field Strait
// refuses is not applied, and a deletion brings back the defaults.
func TestMeshConfigMap(t *testing.T) {
	env := sharedEnv(t)
	f := newFixture(t, env, "meshcfg")
	m, err := LoadMeshConfig(f.ctx, env.Config, f.ns)
	if err != nil || m.RegistryOnly {
		t.Fatalf("without the ConfigMap: %+v, %v; want Istio's defaults", m, err)
	}
	cms := f.kube.CoreV1().ConfigMaps(f.ns)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: MeshConfigMapName, Namespace: f.ns},
		Data: map[string]string{"mesh": "outboundTrafficPolicy:\n  mode: REGISTRY_ONLY\n"}}
	if _, err := cms.Create(f.ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if m, err = LoadMeshConfig(f.ctx, env.Config, f.ns); err != nil || !m.RegistryOnly {
		t.Fatalf("with the ConfigMap: %+v, %v; want REGISTRY_ONLY", m, err)
	}

	p := startPlane(t, env.Config, Options{Mesh: m})
	got := make(chan *meshconfig.Config, 10)
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() {
		done <- WatchMeshConfig(ctx, env.Config, f.ns, m, func(m *meshconfig.Config) {
			p.reg.SetMesh(m)
			got <- m
		}, slog.New(slog.DiscardHandler))
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	next := func(what string) *meshconfig.Config {
		t.Helper()
		select {
		case m := <-got:
			return m
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no mesh config applied", what)
		}
		return nil
	}

	pushesBefore := len(p.pushRequests())
	cm.Data["mesh"] = "outboundTrafficPolicy:\n  mode: ALLOW_ANY\nrootNamespace: meshcfg\n"
	if _, err := cms.Update(f.ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if m := next("update"); m.RegistryOnly || m.RootNamespace != "meshcfg" {
		t.Fatalf("applied %+v, want ALLOW_ANY and root namespace meshcfg", m)
	}
	waitFor(t, func() bool { return p.reg.Snapshot().RootNamespace == "meshcfg" }, "the snapshot to use the new mesh config")
	waitFor(t, func() bool {
		for _, r := range p.pushRequests()[pushesBefore:] {
			if r.Full && r.IsGlobal() && containsReason(r.Reason, proxypush.GlobalUpdate) {
				return true
			}
		}
		return false
	}, "a global full push")

	cm.Data["mesh"] = "enableEnvoyAccessLogService: true\n"
	if _, err := cms.Update(f.ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm.Data["mesh"] = "outboundTrafficPolicy:\n  mode: REGISTRY_ONLY\n"
	if _, err := cms.Update(f.ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The refused content is skipped: the next applied is the valid one.
	if m := next("update after a refused one"); !m.RegistryOnly || m.RootNamespace != "" {
		t.Fatalf("applied %+v, want REGISTRY_ONLY (the refused enableEnvoyAccessLogService never applied)", m)
	}
	if _, err := LoadMeshConfig(f.ctx, env.Config, f.ns); err != nil {
		t.Fatal(err)
	}

	if err := cms.Delete(f.ctx, MeshConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if m := next("delete"); m.RegistryOnly {
		t.Fatalf("after deletion applied %+v, want Istio's defaults", m)
	}
}

func TestLoadMeshConfigRefusesByName(t *testing.T) {
	env := sharedEnv(t)
	f := newFixture(t, env, "meshcfg-bad")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: MeshConfigMapName, Namespace: f.ns},
		Data: map[string]string{"mesh": "enableEnvoyAccessLogService: true\n"}}
	if _, err := f.kube.CoreV1().ConfigMaps(f.ns).Create(f.ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := LoadMeshConfig(f.ctx, env.Config, f.ns)
	if err == nil || !strings.Contains(err.Error(), "ConfigMap meshcfg-bad/istio key mesh: mesh config: enableEnvoyAccessLogService: not supported by Strait yet") {
		t.Fatalf("LoadMeshConfig = %v", err)
	}
}

func containsReason(rs []proxypush.TriggerReason, r proxypush.TriggerReason) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
