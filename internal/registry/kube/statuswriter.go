package kube

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// statusFieldManager is the field manager of straitd's status writes.
const statusFieldManager = "straitd"

// objectRef names one object of a CRD-backed kind.
type objectRef struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

func (o objectRef) String() string { return o.gvr.Resource + " " + o.namespace + "/" + o.name }

// refOf names obj, an object of gvr.
func refOf(gvr schema.GroupVersionResource, obj any) objectRef {
	m, err := meta.Accessor(obj)
	if err != nil {
		return objectRef{gvr: gvr}
	}
	return objectRef{gvr: gvr, namespace: m.GetNamespace(), name: m.GetName()}
}

// generationOf is obj's metadata.generation.
func generationOf(obj any) int64 {
	m, err := meta.Accessor(obj)
	if err != nil {
		return 0
	}
	return m.GetGeneration()
}

// storeKey is the object's key in its informer's store.
func (o objectRef) storeKey() string {
	if o.namespace == "" {
		return o.name
	}
	return o.namespace + "/" + o.name
}

// wantedStatus is what the registry found converting one generation of an
// object: its validation messages (none: the object is served).
type wantedStatus struct {
	uid        types.UID
	generation int64
	messages   []validationMessage
	// gatewayAPI, for a Gateway API object (of kind), is the status
	// straitd wants it to have (gatewayapistatus.go), without the
	// conditions' lastTransitionTime; nil for an Istio object.
	gatewayAPI map[string]any
	kind       string
}

func (w wantedStatus) equal(o wantedStatus) bool {
	return w.uid == o.uid && w.generation == o.generation && slices.Equal(w.messages, o.messages) &&
		w.kind == o.kind && reflect.DeepEqual(w.gatewayAPI, o.gatewayAPI)
}

// statusWriter reports on each Istio object's status why straitd does not
// serve it, and clears the report once it is served. The registry's worker
// tells it what it wants (set, forget) and which objects changed; a write
// loop (run, on the leader only) compares that with each object's status
// in the informer's cache and writes the difference through the status
// subresource. The worker never waits for the API: a failed or slow write
// delays nothing but the status.
//
// The state is level-based: what is written follows from the wanted
// messages and the object as cached, never from the events that led there.
// So a status already right is not written again (no write per resync, no
// loop on our own writes), a new leader finds and fixes what a previous
// one left, and a status someone else rewrote is put back.
type statusWriter struct {
	// Set at creation, read-only afterwards.
	log    *slog.Logger
	client dynamic.Interface

	// mu guards want, stores and queue.
	mu   sync.Mutex
	want map[objectRef]wantedStatus
	// stores are the informer caches of the kinds whose status is written.
	stores map[schema.GroupVersionResource]cache.Store
	// queue holds the objects to look at; nil while no write loop runs.
	queue workqueue.TypedRateLimitingInterface[objectRef]

	// failures is the last write failure logged per object (logged once
	// per object and reason). Owned by the write loop.
	failures map[objectRef]string
}

func newStatusWriter(client dynamic.Interface, log *slog.Logger) *statusWriter {
	return &statusWriter{
		log:      log,
		client:   client,
		want:     map[objectRef]wantedStatus{},
		stores:   map[schema.GroupVersionResource]cache.Store{},
		failures: map[objectRef]string{},
	}
}

// watch adds a kind whose objects' status is written; store is its
// informer's cache.
func (s *statusWriter) watch(gvr schema.GroupVersionResource, store cache.Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stores[gvr] = store
}

// set records what the registry found converting an object; the object is
// looked at again when that differs from what was recorded before.
func (s *statusWriter) set(ref objectRef, w wantedStatus) {
	s.setAll(func(yield func(objectRef, wantedStatus) bool) { yield(ref, w) })
}

// setAll is set for each pair of all, under one lock.
func (s *statusWriter) setAll(all iter.Seq2[objectRef, wantedStatus]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ref, w := range all {
		if old, ok := s.want[ref]; ok && old.equal(w) {
			continue
		}
		s.want[ref] = w
		if s.queue != nil {
			s.queue.Add(ref)
		}
	}
}

// forget drops the object with uid that is gone (or no longer served at
// all); a new object of the same name is kept.
func (s *statusWriter) forget(ref objectRef, uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.want[ref].uid == uid {
		delete(s.want, ref)
	}
}

// changed says that the cached object changed (its status included).
func (s *statusWriter) changed(ref objectRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queue != nil {
		s.queue.Add(ref)
	}
}

// run is one term of writing: it looks at every object with wanted
// messages or with ours on its status, then at each object set or changed,
// until ctx is done.
func (s *statusWriter) run(ctx context.Context) error {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[objectRef](),
		workqueue.TypedRateLimitingQueueConfig[objectRef]{Name: "strait-status"})
	s.mu.Lock()
	if s.queue != nil {
		s.mu.Unlock()
		q.ShutDown()
		return errors.New("kube registry: status writer already running")
	}
	s.queue = q
	for ref, w := range s.want {
		if len(w.messages) > 0 || w.gatewayAPI != nil {
			q.Add(ref)
		}
	}
	for gvr, store := range s.stores {
		for _, obj := range store.List() {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			if list, _, _ := unstructured.NestedSlice(u.Object, "status", "validationMessages"); slices.ContainsFunc(list, isOurs) {
				q.Add(objectRef{gvr: gvr, namespace: u.GetNamespace(), name: u.GetName()})
			}
		}
	}
	s.mu.Unlock()
	s.log.Info("writing config status")

	var wg sync.WaitGroup
	wg.Go(func() {
		<-ctx.Done()
		s.mu.Lock()
		s.queue = nil
		s.mu.Unlock()
		q.ShutDown()
	})
	for {
		ref, quit := q.Get()
		if quit {
			break
		}
		s.sync(ctx, q, ref)
		q.Done(ref)
	}
	wg.Wait()
	return nil
}

// sync brings one object's status in line with what is wanted for it.
func (s *statusWriter) sync(ctx context.Context, q workqueue.TypedRateLimitingInterface[objectRef], ref objectRef) {
	s.mu.Lock()
	w, known := s.want[ref]
	store := s.stores[ref.gvr]
	s.mu.Unlock()
	if !known || store == nil {
		delete(s.failures, ref)
		q.Forget(ref)
		return
	}
	obj, exists, _ := store.GetByKey(ref.storeKey())
	u, ok := obj.(*unstructured.Unstructured)
	if !exists || !ok || u.GetUID() != w.uid || u.GetGeneration() != w.generation {
		// Gone, or a version the registry has not converted yet: it calls
		// set when it has.
		q.Forget(ref)
		return
	}
	cur, _ := u.Object["status"].(map[string]any)
	var next map[string]any
	var write bool
	if w.gatewayAPI != nil {
		next, write = nextGatewayAPIStatus(w.kind, cur, w.gatewayAPI, time.Now())
	} else {
		next, write = nextStatus(cur, w.generation, w.messages)
	}
	if !write {
		q.Forget(ref)
		return
	}
	upd := u.DeepCopy()
	upd.Object["status"] = next
	_, err := s.client.Resource(ref.gvr).Namespace(ref.namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{FieldManager: statusFieldManager})
	switch {
	case err == nil:
		if _, failed := s.failures[ref]; failed {
			s.log.Info("config status written after earlier failures", "object", ref.String())
			delete(s.failures, ref)
		}
		s.log.Debug("config status written", "object", ref.String(), "generation", w.generation, "messages", len(w.messages))
		q.Forget(ref)
		return
	case apierrors.IsNotFound(err), ctx.Err() != nil:
		q.Forget(ref)
		return
	}
	reason := string(apierrors.ReasonForError(err))
	if reason == "" {
		reason = "error"
	}
	if s.failures[ref] != reason {
		s.failures[ref] = reason
		msg := "cannot write config status; the config is served as before, only its status is stale"
		if apierrors.IsForbidden(err) {
			msg += " (grant straitd update on this kind's status subresource)"
		}
		s.log.Warn(msg, "object", ref.String(), "reason", reason, "error", err)
	}
	if apierrors.IsForbidden(err) {
		// Tried again when the object or what is wanted for it changes,
		// or in the next term.
		q.Forget(ref)
		return
	}
	// A conflict (the cache is behind) or a transient failure: look again.
	q.AddRateLimited(ref)
}
