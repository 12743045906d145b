package kube

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
)

// eventType is what happened to an object.
type eventType int

const (
	eventAdd eventType = iota
	eventUpdate
	eventDelete
)

func (t eventType) String() string {
	switch t {
	case eventAdd:
		return "add"
	case eventUpdate:
		return "update"
	}
	return "delete"
}

// event is one informer callback: the (event type, object) pair
// plus the kind whose handler processes it. For an update old is the
// previous object.
type event struct {
	kind     string // a handler key: kindService, "networking.istio.io/VirtualService", ...
	typ      eventType
	old, obj any
	at       time.Time // when the callback ran
}

// queue is the buffer between informer callbacks and the worker. Informer
// callbacks only append to it (they must not block); the worker takes
// everything queued at once, so a burst of events costs one snapshot
// rebuild. It is unbounded: informers deliver at most one event per object
// change, and the worker drains it continuously.
type queue struct {
	mu     sync.Mutex
	events []event // guarded by mu
	signal chan struct{}
}

func newQueue() *queue { return &queue{signal: make(chan struct{}, 1)} }

func (q *queue) push(ev event) {
	ev.at = time.Now()
	q.mu.Lock()
	q.events = append(q.events, ev)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// take waits for events and returns all queued ones, or nil when ctx is
// done.
func (q *queue) take(ctx context.Context) []event {
	for {
		q.mu.Lock()
		evs := q.events
		q.events = nil
		q.mu.Unlock()
		if len(evs) > 0 {
			return evs
		}
		select {
		case <-ctx.Done():
			return nil
		case <-q.signal:
		}
	}
}

// handlerFor returns informer callbacks that only enqueue events of kind.
func (q *queue) handlerFor(kind string) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { q.push(event{kind: kind, typ: eventAdd, obj: obj}) },
		UpdateFunc: func(old, obj any) {
			q.push(event{kind: kind, typ: eventUpdate, old: old, obj: obj})
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			q.push(event{kind: kind, typ: eventDelete, obj: obj})
		},
	}
}
