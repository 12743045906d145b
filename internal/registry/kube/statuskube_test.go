package kube

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

var vsGVR = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"}

func virtualService(ns, name string, http map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"hosts": []any{"web"}, "http": []any{http}},
	}}
}

// routeTo is a valid HTTP route; with statPrefix it sets a field Strait
// refuses.
func routeTo(statPrefix string) map[string]any {
	r := map[string]any{"route": []any{map[string]any{"destination": map[string]any{"host": "web"}}}}
	if statPrefix != "" {
		r["match"] = []any{map[string]any{"statPrefix": statPrefix}}
	}
	return r
}

// TestStatusOnRealAPIServer: with WriteStatus running, a VirtualService
// that sets a refused field gets a validation message naming the field on
// its status (with the generation it describes), an invalid one gets one
// too, a valid one is never written; fixing the refused one clears its
// message; a status someone else rewrote is put back; and rebuilds after
// that write nothing more.
func TestStatusOnRealAPIServer(t *testing.T) {
	env := sharedEnv(t)
	f := newFixture(t, env, "kstatus")
	p := startPlane(t, env.Config, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := p.reg.WriteStatus(ctx); err != nil {
			t.Errorf("WriteStatus: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	vss := env.Dynamic.Resource(vsGVR).Namespace(f.ns)
	create := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		t.Helper()
		got, err := vss.Create(f.ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s: %v", u.GetName(), err)
		}
		return got
	}
	good := create(virtualService(f.ns, "good", routeTo("")))
	create(virtualService(f.ns, "refused", routeTo("stats")))
	invalid := virtualService(f.ns, "invalid", routeTo(""))
	delete(invalid.Object["spec"].(map[string]any), "http")
	create(invalid)

	refused := waitStatus(t, vss, "refused", "a validation message naming statPrefix", func(u *unstructured.Unstructured) bool {
		return hasMessage(u, CodeNotSupported, "spec.http[0].match[0].statPrefix: not supported by Strait yet")
	})
	if got := observedGeneration(refused.Object["status"].(map[string]any)); got != refused.GetGeneration() {
		t.Errorf("refused: observedGeneration %d, want the generation %d", got, refused.GetGeneration())
	}
	msgs, _, _ := unstructured.NestedSlice(refused.Object, "status", "validationMessages")
	if len(msgs) != 1 || msgs[0].(map[string]any)["level"] != "ERROR" {
		t.Errorf("refused: validationMessages %v, want one at level ERROR", msgs)
	}
	waitStatus(t, vss, "invalid", "a validation message of an invalid config", func(u *unstructured.Unstructured) bool {
		list, _, _ := unstructured.NestedSlice(u.Object, "status", "validationMessages")
		return len(list) > 0 && hasMessage(u, CodeInvalid, "kubernetes VirtualService "+f.ns+"/invalid")
	})

	// Refused for a second field: the store (without it) is the same, the
	// status is not.
	twice := refused.DeepCopy()
	twice.Object["spec"].(map[string]any)["http"] = []any{routeTo("a"), routeTo("b")}
	if _, err := vss.Update(f.ctx, twice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	refused = waitStatus(t, vss, "refused", "two messages", func(u *unstructured.Unstructured) bool {
		return hasMessage(u, CodeNotSupported, "spec.http[0].match[0].statPrefix") && hasMessage(u, CodeNotSupported, "spec.http[1].match[0].statPrefix")
	})

	// Fixed: the message goes, and the status says which generation.
	fixed := refused.DeepCopy()
	fixed.Object["spec"] = virtualService(f.ns, "refused", routeTo("")).Object["spec"]
	if _, err := vss.Update(f.ctx, fixed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, vss, "refused", "its message cleared", func(u *unstructured.Unstructured) bool {
		list, found, _ := unstructured.NestedSlice(u.Object, "status", "validationMessages")
		st, _ := u.Object["status"].(map[string]any)
		return !found && len(list) == 0 && observedGeneration(st) == u.GetGeneration()
	})

	// Someone else removes our message: it is written again.
	cur, err := vss.Get(f.ctx, "invalid", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(cur.Object, "status")
	if _, err := vss.UpdateStatus(f.ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, vss, "invalid", "its message written again", func(u *unstructured.Unstructured) bool {
		return hasMessage(u, CodeInvalid, "")
	})

	// Of two ServiceEntries for one host, the second is not served for it:
	// a warning on its status, gone when the first is deleted.
	ses := env.Dynamic.Resource(schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "serviceentries"}).Namespace(f.ns)
	for _, name := range []string{"ext-a", "ext-b"} {
		se := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
			"metadata": map[string]any{"name": name, "namespace": f.ns},
			"spec": map[string]any{"hosts": []any{"ext.example.com"}, "location": "MESH_EXTERNAL", "resolution": "DNS",
				"ports": []any{map[string]any{"number": int64(80), "name": "http", "protocol": "HTTP"}}},
		}}
		if _, err := ses.Create(f.ctx, se, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitStatus(t, ses, "ext-b", "a conflict warning", func(u *unstructured.Unstructured) bool {
		list, _, _ := unstructured.NestedSlice(u.Object, "status", "validationMessages")
		return len(list) == 1 && list[0].(map[string]any)["level"] == "WARNING" &&
			hasMessage(u, CodeConflict, "spec.hosts[0]: host ext.example.com is already defined by ServiceEntry "+f.ns+"/ext-a")
	})
	if st, ok := mustGet(t, ses, "ext-a").Object["status"]; ok {
		t.Errorf("the ServiceEntry served got a status: %v", st)
	}
	if err := ses.Delete(f.ctx, "ext-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, ses, "ext-b", "the warning cleared", func(u *unstructured.Unstructured) bool {
		_, found, _ := unstructured.NestedSlice(u.Object, "status", "validationMessages")
		return !found
	})

	// A rebuild (a Service appears) writes nothing: the statuses are
	// already right.
	before := resourceVersions(t, f.ctx, vss)
	f.service("web", corev1.ServicePort{Name: "http", Port: 80})
	deadline := time.Now().Add(30 * time.Second)
	for p.reg.Snapshot().Configs.Get(serviceKey(f.ns, "web")) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the Service did not reach the snapshot")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The write loop takes objects in order: once a VirtualService created
	// after the rebuild has its message, whatever the rebuild queued has
	// been looked at.
	create(virtualService(f.ns, "marker", routeTo("marker")))
	waitStatus(t, vss, "marker", "a message", func(u *unstructured.Unstructured) bool { return hasMessage(u, CodeNotSupported, "") })
	delete(before, "marker")
	after := resourceVersions(t, f.ctx, vss)
	delete(after, "marker")
	if !equalMaps(before, after) {
		t.Errorf("objects rewritten by a rebuild that changed none of them: %v → %v", before, after)
	}
	if st, ok := mustGet(t, vss, "good").Object["status"]; ok {
		t.Errorf("valid VirtualService got a status: %v", st)
	}
	if rv := mustGet(t, vss, "good").GetResourceVersion(); rv != good.GetResourceVersion() {
		t.Errorf("valid VirtualService written: resourceVersion %s → %s", good.GetResourceVersion(), rv)
	}
}

// hasMessage reports a validation message of code on u whose text
// contains text.
func hasMessage(u *unstructured.Unstructured, code, text string) bool {
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "validationMessages")
	for _, v := range list {
		m, _ := v.(map[string]any)
		typ, _ := m["type"].(map[string]any)
		name, _ := typ["name"].(string)
		if typ["code"] == code && strings.Contains(name, text) {
			return true
		}
	}
	return false
}

func waitStatus(t *testing.T, c dynamic.ResourceInterface, name, what string, ok func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		u := mustGet(t, c, name)
		if ok(u) {
			return u
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s did not happen within 30s; status %v", name, what, u.Object["status"])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func mustGet(t *testing.T, c dynamic.ResourceInterface, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := c.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return u
}

func resourceVersions(t *testing.T, ctx context.Context, c dynamic.ResourceInterface) map[string]string {
	t.Helper()
	list, err := c.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, u := range list.Items {
		out[u.GetName()] = u.GetResourceVersion()
	}
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
