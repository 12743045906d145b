package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/straitmesh/strait/internal/istioconfig"
)

func msg(code, text string) map[string]any {
	return map[string]any{"level": "ERROR", "type": map[string]any{"code": code, "name": text}}
}

// istioMsg is a message of another writer (istiod's analysis).
var istioMsg = map[string]any{"level": "WARNING", "type": map[string]any{"code": "IST0101"}, "documentationUrl": "https://istio.io/x"}

func TestNextStatus(t *testing.T) {
	refused := []validationMessage{{level: "ERROR", code: CodeNotSupported, description: "f: spec.x: not supported by Strait yet"}}
	tests := []struct {
		name  string
		cur   map[string]any
		gen   int64
		want  []validationMessage
		write bool
		next  map[string]any
	}{
		{name: "valid, never written", cur: nil, gen: 3, want: nil, write: false},
		{name: "valid, status of others", cur: map[string]any{"validationMessages": []any{istioMsg}, "observedGeneration": int64(1)}, gen: 3, write: false},
		{name: "refused, no status", cur: nil, gen: 3, want: refused, write: true,
			next: map[string]any{"validationMessages": []any{msg(CodeNotSupported, "f: spec.x: not supported by Strait yet")}, "observedGeneration": int64(3)}},
		{name: "refused, already said", cur: map[string]any{"validationMessages": []any{msg(CodeNotSupported, "f: spec.x: not supported by Strait yet")}, "observedGeneration": int64(3)}, gen: 3, want: refused, write: false},
		{name: "refused, said as a string generation", cur: map[string]any{"validationMessages": []any{msg(CodeNotSupported, "f: spec.x: not supported by Strait yet")}, "observedGeneration": "3"}, gen: 3, want: refused, write: false},
		{name: "refused, said for an older generation", cur: map[string]any{"validationMessages": []any{msg(CodeNotSupported, "f: spec.x: not supported by Strait yet")}, "observedGeneration": int64(2)}, gen: 3, want: refused, write: true,
			next: map[string]any{"validationMessages": []any{msg(CodeNotSupported, "f: spec.x: not supported by Strait yet")}, "observedGeneration": int64(3)}},
		{name: "refused, other text", cur: map[string]any{"validationMessages": []any{msg(CodeNotSupported, "f: spec.y: not supported by Strait yet")}, "observedGeneration": int64(3)}, gen: 3, want: refused, write: true,
			next: map[string]any{"validationMessages": []any{msg(CodeNotSupported, "f: spec.x: not supported by Strait yet")}, "observedGeneration": int64(3)}},
		{name: "refused, other code", cur: map[string]any{"validationMessages": []any{msg(CodeInvalid, "f: spec.x: not supported by Strait yet")}, "observedGeneration": int64(3)}, gen: 3, want: refused, write: true,
			next: map[string]any{"validationMessages": []any{msg(CodeNotSupported, "f: spec.x: not supported by Strait yet")}, "observedGeneration": int64(3)}},
		{name: "refused, message with extra field", cur: map[string]any{"validationMessages": []any{map[string]any{"level": "ERROR", "documentationUrl": "u", "type": map[string]any{"code": CodeNotSupported, "name": "f: spec.x: not supported by Strait yet"}}}, "observedGeneration": int64(3)}, gen: 3, want: refused, write: true,
			next: map[string]any{"validationMessages": []any{msg(CodeNotSupported, "f: spec.x: not supported by Strait yet")}, "observedGeneration": int64(3)}},
		{name: "refused, at another level", cur: map[string]any{"validationMessages": []any{map[string]any{"level": "WARNING", "type": map[string]any{"code": CodeNotSupported, "name": "f: spec.x: not supported by Strait yet"}}}, "observedGeneration": int64(3)}, gen: 3, want: refused, write: true,
			next: map[string]any{"validationMessages": []any{msg(CodeNotSupported, "f: spec.x: not supported by Strait yet")}, "observedGeneration": int64(3)}},
		{name: "refused, others' messages and conditions kept", cur: map[string]any{"validationMessages": []any{istioMsg}, "conditions": []any{"c"}, "observedGeneration": int64(1)}, gen: 3, want: refused, write: true,
			next: map[string]any{"validationMessages": []any{istioMsg, msg(CodeNotSupported, "f: spec.x: not supported by Strait yet")}, "conditions": []any{"c"}, "observedGeneration": int64(3)}},
		{name: "valid again: ours cleared", cur: map[string]any{"validationMessages": []any{msg(CodeNotSupported, "f: spec.x: not supported by Strait yet")}, "observedGeneration": int64(3)}, gen: 4, write: true,
			next: map[string]any{"observedGeneration": int64(4)}},
		{name: "valid again: others kept", cur: map[string]any{"validationMessages": []any{msg(CodeInvalid, "f: bad"), istioMsg}, "observedGeneration": int64(3)}, gen: 4, write: true,
			next: map[string]any{"validationMessages": []any{istioMsg}, "observedGeneration": int64(4)}},
		{name: "two problems, in order", cur: map[string]any{"validationMessages": []any{msg(CodeInvalid, "b"), msg(CodeNotSupported, "a")}, "observedGeneration": int64(1)}, gen: 1,
			want: []validationMessage{{"ERROR", CodeNotSupported, "a"}, {"ERROR", CodeInvalid, "b"}}, write: true,
			next: map[string]any{"validationMessages": []any{msg(CodeNotSupported, "a"), msg(CodeInvalid, "b")}, "observedGeneration": int64(1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next, write := nextStatus(tc.cur, tc.gen, tc.want)
			if write != tc.write {
				t.Fatalf("write %v, want %v (next %v)", write, tc.write, next)
			}
			if write && !reflect.DeepEqual(next, tc.next) {
				t.Errorf("next status\n %v\nwant\n %v", next, tc.next)
			}
			if !write && next != nil {
				t.Errorf("no write but a status %v", next)
			}
		})
	}
}

func TestObservedGeneration(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want int64
	}{{int64(7), 7}, {float64(7), 7}, {"7", 7}, {"x", -1}, {nil, -1}, {true, -1}} {
		st := map[string]any{}
		if tc.v != nil {
			st["observedGeneration"] = tc.v
		}
		if got := observedGeneration(st); got != tc.want {
			t.Errorf("observedGeneration(%#v) = %d, want %d", tc.v, got, tc.want)
		}
	}
}

// Each field problem of a conversion is one message, with the text of its
// log line; a refused field is CodeNotSupported, anything else
// CodeInvalid.
func TestMessagesFor(t *testing.T) {
	if got := messagesFor(nil); got != nil {
		t.Errorf("messagesFor(nil) = %v", got)
	}
	vs := virtualService("demo", "two", routeTo("stats"))
	vs.Object["spec"].(map[string]any)["http"] = []any{routeTo("a"), routeTo("b")}
	invalid := virtualService("demo", "bad", routeTo(""))
	delete(invalid.Object["spec"].(map[string]any), "http")
	for _, tc := range []struct {
		obj  *unstructured.Unstructured
		want []string
	}{
		{vs, []string{
			CodeNotSupported + " kubernetes VirtualService demo/two: document 1: spec.http[0].match[0].statPrefix: not supported by Strait yet",
			CodeNotSupported + " kubernetes VirtualService demo/two: document 1: spec.http[1].match[0].statPrefix: not supported by Strait yet",
		}},
		{invalid, []string{CodeInvalid + " kubernetes VirtualService demo/bad: document 1: spec: must have at least one of http, tcp or tls routes"}},
	} {
		_, err := istioConfig("networking.istio.io", "VirtualService", "v1", tc.obj)
		if err == nil {
			t.Fatalf("%s: want an error", tc.obj.GetName())
		}
		got := messagesFor(err)
		var text []string
		for _, m := range got {
			text = append(text, m.code+" "+m.description)
			if !strings.Contains(err.Error(), m.description) {
				t.Errorf("message %q is not the logged text %q", m.description, err.Error())
			}
		}
		if !reflect.DeepEqual(text, tc.want) {
			t.Errorf("%s: messages\n %q\nwant\n %q", tc.obj.GetName(), text, tc.want)
		}
	}
	plain := messagesFor(errors.New("boom"))
	if len(plain) != 1 || plain[0] != (validationMessage{"ERROR", CodeInvalid, "boom"}) {
		t.Errorf("plain error: %v", plain)
	}
	wrapped := messagesFor(fmt.Errorf("x: %w", &istioconfig.FieldError{Field: "spec.a", Problem: "not supported by Strait yet", Err: istioconfig.ErrNotSupported}))
	if len(wrapped) != 1 || wrapped[0].code != CodeNotSupported {
		t.Errorf("wrapped refusal: %v", wrapped)
	}
}

// writerFixture is a statusWriter on client-go's fake dynamic client, with
// the informer cache replaced by a store the test fills.
type writerFixture struct {
	t      *testing.T
	client *dynamicfake.FakeDynamicClient
	store  cache.Store
	w      *statusWriter
	logs   *syncLog
	cancel context.CancelFunc
	done   chan struct{}
}

type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newWriterFixture(t *testing.T, objs ...*unstructured.Unstructured) *writerFixture {
	t.Helper()
	scheme := runtime.NewScheme()
	var robjs []runtime.Object
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, o := range objs {
		robjs = append(robjs, o.DeepCopy())
		if err := store.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{vsGVR: "VirtualServiceList"}, robjs...)
	logs := &syncLog{}
	w := newStatusWriter(client, slog.New(slog.NewTextHandler(logs, nil)))
	w.watch(vsGVR, store)
	return &writerFixture{t: t, client: client, store: store, w: w, logs: logs}
}

func (f *writerFixture) start() {
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.done = cancel, make(chan struct{})
	go func() {
		defer close(f.done)
		if err := f.w.run(ctx); err != nil {
			f.t.Errorf("run: %v", err)
		}
	}()
	f.t.Cleanup(f.stop)
	// run has started once it takes changes.
	f.waitFor("the write loop to start", func() bool {
		f.w.mu.Lock()
		defer f.w.mu.Unlock()
		return f.w.queue != nil
	})
}

func (f *writerFixture) stop() {
	if f.cancel != nil {
		f.cancel()
		<-f.done
		f.cancel = nil
	}
}

func (f *writerFixture) waitFor(what string, ok func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			f.t.Fatalf("%s did not happen within 10s; actions %v; log %s", what, f.client.Actions(), f.logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// statusUpdates returns the status writes the client received.
func (f *writerFixture) statusUpdates() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, a := range f.client.Actions() {
		if u, ok := a.(k8stesting.UpdateAction); ok && a.GetSubresource() == "status" {
			out = append(out, u.GetObject().(*unstructured.Unstructured))
		}
	}
	return out
}

// drained waits until the write loop has looked at everything queued: a
// marker object, queued last, has its status written.
func (f *writerFixture) drained() {
	f.t.Helper()
	marker := vsObject("marker", "m-uid", 1, nil)
	if _, ok, _ := f.store.Get(marker); !ok {
		if err := f.client.Tracker().Add(marker.DeepCopy()); err != nil {
			f.t.Fatal(err)
		}
		if err := f.store.Add(marker); err != nil {
			f.t.Fatal(err)
		}
	}
	n := len(f.markerWrites())
	// A new text each time: a write is due.
	f.w.set(objectRef{gvr: vsGVR, namespace: "demo", name: "marker"}, wantedStatus{uid: "m-uid", generation: 1,
		messages: []validationMessage{{"ERROR", CodeInvalid, fmt.Sprint("marker ", n)}}})
	f.waitFor("the marker's status write", func() bool { return len(f.markerWrites()) > n })
	// Keep the cache in step, as the informer would.
	if err := f.store.Update(f.markerWrites()[n]); err != nil {
		f.t.Fatal(err)
	}
}

func (f *writerFixture) markerWrites() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range f.statusUpdates() {
		if u.GetName() == "marker" {
			out = append(out, u)
		}
	}
	return out
}

func (f *writerFixture) writesOf(name string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range f.statusUpdates() {
		if u.GetName() == name {
			out = append(out, u)
		}
	}
	return out
}

func vsObject(name string, uid types.UID, generation int64, status map[string]any) *unstructured.Unstructured {
	u := virtualService("demo", name, routeTo(""))
	u.SetUID(uid)
	u.SetGeneration(generation)
	u.SetResourceVersion("1")
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

var (
	refusedRef = objectRef{gvr: vsGVR, namespace: "demo", name: "refused"}
	validRef   = objectRef{gvr: vsGVR, namespace: "demo", name: "valid"}
	refusedMsg = []validationMessage{{"ERROR", CodeNotSupported, "kubernetes VirtualService demo/refused: document 1: spec.http[0].match[0].statPrefix: not supported by Strait yet"}}
)

// The writer writes a refused object's message once, never writes a valid
// object, does not write again what is already there, and clears the
// message when the object is valid again.
func TestStatusWriterWritesOnlyDifferences(t *testing.T) {
	f := newWriterFixture(t, vsObject("refused", "r-uid", 2, nil), vsObject("valid", "v-uid", 1, nil))
	f.start()
	f.w.set(validRef, wantedStatus{uid: "v-uid", generation: 1})
	f.w.set(refusedRef, wantedStatus{uid: "r-uid", generation: 2, messages: refusedMsg})
	f.waitFor("the refused object's status", func() bool { return len(f.writesOf("refused")) == 1 })
	got := f.writesOf("refused")[0]
	if !hasMessage(got, CodeNotSupported, "spec.http[0].match[0].statPrefix: not supported by Strait yet") {
		t.Errorf("written status %v lacks the message", got.Object["status"])
	}
	if g := observedGeneration(got.Object["status"].(map[string]any)); g != 2 {
		t.Errorf("observedGeneration %d, want 2", g)
	}
	if !reflect.DeepEqual(got.Object["spec"], vsObject("refused", "", 0, nil).Object["spec"]) {
		t.Errorf("status write changed the spec: %v", got.Object["spec"])
	}
	// The informer brings our write back; set again with the same result
	// (a rebuild) and a change event: nothing more is written.
	if err := f.store.Update(got); err != nil {
		t.Fatal(err)
	}
	f.w.changed(refusedRef)
	f.w.set(refusedRef, wantedStatus{uid: "r-uid", generation: 2, messages: refusedMsg})
	f.w.changed(validRef)
	f.drained()
	if n := len(f.writesOf("refused")); n != 1 {
		t.Errorf("%d writes of an unchanged status, want 1", n)
	}
	if n := len(f.writesOf("valid")); n != 0 {
		t.Errorf("valid object written %d times", n)
	}

	// Fixed in generation 3: cleared, and the generation said.
	fixed := got.DeepCopy()
	fixed.SetGeneration(3)
	if err := f.store.Update(fixed); err != nil {
		t.Fatal(err)
	}
	f.w.set(refusedRef, wantedStatus{uid: "r-uid", generation: 3})
	f.waitFor("the message cleared", func() bool { return len(f.writesOf("refused")) == 2 })
	cleared := f.writesOf("refused")[1]
	if _, found, _ := unstructured.NestedSlice(cleared.Object, "status", "validationMessages"); found {
		t.Errorf("cleared status still has validationMessages: %v", cleared.Object["status"])
	}
	if g := observedGeneration(cleared.Object["status"].(map[string]any)); g != 3 {
		t.Errorf("observedGeneration %d, want 3", g)
	}
}

// What is wanted for one generation is not written on another (the
// registry has not converted the newer one yet), nor on a new object of
// the same name.
func TestStatusWriterWaitsForTheConvertedGeneration(t *testing.T) {
	f := newWriterFixture(t, vsObject("refused", "r-uid", 5, nil))
	f.start()
	f.w.set(refusedRef, wantedStatus{uid: "r-uid", generation: 4, messages: refusedMsg})
	f.w.set(objectRef{gvr: vsGVR, namespace: "demo", name: "refused"}, wantedStatus{uid: "other-uid", generation: 5, messages: refusedMsg})
	f.drained()
	if n := len(f.writesOf("refused")); n != 0 {
		t.Errorf("%d writes for a generation or object the registry did not convert", n)
	}
	f.w.set(refusedRef, wantedStatus{uid: "r-uid", generation: 5, messages: refusedMsg})
	f.waitFor("the write for the converted generation", func() bool { return len(f.writesOf("refused")) == 1 })
}

// A new term (a new leader) fixes what is stale: messages wanted but not
// written, and messages of ours left on objects that are valid now; it
// does not touch others.
func TestStatusWriterNewTermFixesStaleStatus(t *testing.T) {
	stale := vsObject("valid", "v-uid", 2, map[string]any{
		"validationMessages": []any{msg(CodeInvalid, "old problem"), istioMsg}, "observedGeneration": int64(1)})
	f := newWriterFixture(t, vsObject("refused", "r-uid", 1, nil), stale)
	// Wanted before the term starts: nothing written yet.
	f.w.set(refusedRef, wantedStatus{uid: "r-uid", generation: 1, messages: refusedMsg})
	f.w.set(validRef, wantedStatus{uid: "v-uid", generation: 2})
	if n := len(f.statusUpdates()); n != 0 {
		t.Fatalf("%d status writes with no write loop running", n)
	}
	f.start()
	f.waitFor("both fixed", func() bool { return len(f.writesOf("refused")) == 1 && len(f.writesOf("valid")) == 1 })
	v := f.writesOf("valid")[0]
	list, _, _ := unstructured.NestedSlice(v.Object, "status", "validationMessages")
	if !reflect.DeepEqual(list, []any{istioMsg}) {
		t.Errorf("valid object's messages %v, want only istiod's", list)
	}
	// After the term, changes queue nowhere and nothing is written.
	f.stop()
	f.w.set(refusedRef, wantedStatus{uid: "r-uid", generation: 1, messages: []validationMessage{{"ERROR", CodeInvalid, "new"}}})
	f.w.changed(refusedRef)
	if n := len(f.writesOf("refused")); n != 1 {
		t.Errorf("%d writes after the term ended", n)
	}
	// The next term writes it.
	f.start()
	f.waitFor("the next term's write", func() bool { return len(f.writesOf("refused")) == 2 })
}

// A forbidden write (RBAC) is logged once, with the object and the
// reason, is not retried in a loop, and does not stop other writes.
func TestStatusWriterForbiddenLoggedOnce(t *testing.T) {
	f := newWriterFixture(t, vsObject("refused", "r-uid", 1, nil))
	var attempts sync.Map
	f.client.PrependReactor("update", "virtualservices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.UpdateAction).GetObject().(*unstructured.Unstructured)
		if a.GetSubresource() != "status" || u.GetName() != "refused" {
			return false, nil, nil
		}
		n, _ := attempts.LoadOrStore("n", new(int))
		*n.(*int)++
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: vsGVR.Group, Resource: "virtualservices/status"}, "refused", errors.New("RBAC says no"))
	})
	f.start()
	f.w.set(refusedRef, wantedStatus{uid: "r-uid", generation: 1, messages: refusedMsg}) // first look
	f.drained()
	f.w.changed(refusedRef) // looked at again: fails again, not logged again
	f.drained()
	logs := f.logs.String()
	if n := strings.Count(logs, "cannot write config status"); n != 1 {
		t.Errorf("failure logged %d times, want once:\n%s", n, logs)
	}
	for _, want := range []string{"level=WARN", "object=\"virtualservices demo/refused\"", "reason=Forbidden", "RBAC says no", "status subresource"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	n, _ := attempts.Load("n")
	if got := *n.(*int); got != 2 {
		t.Errorf("%d attempts for two looks, want 2 (more is a retry loop)", got)
	}
}

// A conflict (the cache was behind) is tried again.
func TestStatusWriterRetriesConflict(t *testing.T) {
	f := newWriterFixture(t, vsObject("refused", "r-uid", 1, nil))
	var mu sync.Mutex
	conflicts := 1
	f.client.PrependReactor("update", "virtualservices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if a.GetSubresource() == "status" && conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: vsGVR.Group, Resource: "virtualservices"}, "refused", errors.New("stale"))
		}
		return false, nil, nil
	})
	f.start()
	f.w.set(refusedRef, wantedStatus{uid: "r-uid", generation: 1, messages: refusedMsg})
	f.waitFor("the write after the conflict", func() bool { return len(f.writesOf("refused")) == 2 })
	if !strings.Contains(f.logs.String(), "reason=Conflict") {
		t.Errorf("conflict not logged:\n%s", f.logs.String())
	}
	if !strings.Contains(f.logs.String(), "config status written after earlier failures") {
		t.Errorf("recovery not logged:\n%s", f.logs.String())
	}
}

// Only one write loop at a time.
func TestStatusWriterRunTwice(t *testing.T) {
	f := newWriterFixture(t)
	f.start()
	if err := f.w.run(context.Background()); err == nil {
		t.Error("second run while one runs: no error")
	}
}

// forget drops what is wanted for the object it names, not for a new
// object of the same name.
func TestStatusWriterForget(t *testing.T) {
	w := newStatusWriter(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), slog.New(slog.DiscardHandler))
	w.set(refusedRef, wantedStatus{uid: "new", generation: 1})
	w.forget(refusedRef, "old")
	if _, ok := w.want[refusedRef]; !ok {
		t.Error("forget of the old object dropped the new one")
	}
	w.forget(refusedRef, "new")
	if _, ok := w.want[refusedRef]; ok {
		t.Error("forget kept the object")
	}
}

// The snapshot's problems reach the objects they were converted from (by
// source), sorted; problems of the static source, of Services or without a
// source reach none.
func TestConflictsByObject(t *testing.T) {
	a := objectRef{gvr: vsGVR, namespace: "demo", name: "a"}
	b := objectRef{gvr: vsGVR, namespace: "demo", name: "b"}
	r := &Registry{converted: map[types.UID]convertedConfig{
		"ua": {ref: a, cfg: &istioconfig.Config{Meta: istioconfig.Meta{Source: istioconfig.Source{File: "kubernetes VirtualService demo/a", Document: 1}}}},
		"ub": {ref: b, cfg: &istioconfig.Config{Meta: istioconfig.Meta{Source: istioconfig.Source{File: "kubernetes VirtualService demo/b", Document: 1}}}},
		"uc": {ref: objectRef{gvr: vsGVR, namespace: "demo", name: "c"}, err: errors.New("invalid")},
	}}
	problems := []error{
		&istioconfig.FieldError{File: "kubernetes VirtualService demo/a", Document: 1, Field: "spec.http[1]", Problem: "z"},
		&istioconfig.FieldError{File: "kubernetes VirtualService demo/a", Document: 1, Field: "spec.http[0]", Problem: "y"},
		&istioconfig.FieldError{File: "static.yaml", Document: 1, Field: "spec", Problem: "x"},
		&istioconfig.FieldError{File: "kubernetes Service demo/a", Field: "spec", Problem: "x"},
		errors.New("kubernetes VirtualService demo/b: not a field error"),
	}
	got := r.conflictsByObject(problems)
	want := map[objectRef][]validationMessage{a: {
		{"WARNING", CodeConflict, "kubernetes VirtualService demo/a: document 1: spec.http[0]: y"},
		{"WARNING", CodeConflict, "kubernetes VirtualService demo/a: document 1: spec.http[1]: z"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("conflicts\n %v\nwant\n %v", got, want)
	}
	if got := r.conflictsByObject(nil); got != nil {
		t.Errorf("no problems: %v", got)
	}
}

// BenchmarkReportStatus: what telling the status writer costs per rebuild
// with 10,000 converted objects, 1% of them refused, none changed.
func BenchmarkReportStatus(b *testing.B) {
	r := &Registry{
		converted: map[types.UID]convertedConfig{},
		status:    newStatusWriter(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), slog.New(slog.DiscardHandler)),
	}
	for i := range 10000 {
		cc := convertedConfig{ref: objectRef{gvr: vsGVR, namespace: "demo", name: fmt.Sprint("vs-", i)}, generation: 1}
		if i%100 == 0 {
			cc.messages = refusedMsg
		}
		r.converted[types.UID(fmt.Sprint(i))] = cc
	}
	r.reportStatus()
	b.ReportAllocs()
	for b.Loop() {
		r.reportStatus()
	}
}
