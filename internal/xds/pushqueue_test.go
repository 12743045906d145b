package xds

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/straitmesh/strait/internal/proxypush"
)

func reasons(rs ...proxypush.TriggerReason) *proxypush.PushRequest {
	return &proxypush.PushRequest{Reason: rs}
}

// dequeueWithin fails the test if Dequeue does not return within d.
func dequeueWithin(t *testing.T, q *PushQueue, d time.Duration) (*Connection, *proxypush.PushRequest) {
	t.Helper()
	type item struct {
		con *Connection
		req *proxypush.PushRequest
	}
	ch := make(chan item, 1)
	go func() {
		c, r, _, _ := q.Dequeue()
		ch <- item{c, r}
	}()
	select {
	case it := <-ch:
		return it.con, it.req
	case <-time.After(d):
		t.Fatalf("Dequeue did not return within %v", d)
		return nil, nil
	}
}

func TestPushQueueEnqueueWhilePendingMerges(t *testing.T) {
	q := NewPushQueue()
	a, b := &Connection{id: "a"}, &Connection{id: "b"}
	q.Enqueue(a, reasons(proxypush.ConfigUpdate))
	q.Enqueue(b, reasons(proxypush.EndpointUpdate))
	q.Enqueue(a, &proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.ServiceUpdate}})
	if got := q.Pending(); got != 2 {
		t.Fatalf("Pending = %d, want 2 (a merged, not queued twice)", got)
	}
	con, req := dequeueWithin(t, q, time.Second)
	if con != a {
		t.Fatalf("first dequeued = %s, want a (FIFO)", con.id)
	}
	if !req.Full || !slices.Equal(req.Reason, []proxypush.TriggerReason{proxypush.ConfigUpdate, proxypush.ServiceUpdate}) {
		t.Fatalf("merged request = %+v, want Full with reasons [config service]", req)
	}
	con, req = dequeueWithin(t, q, time.Second)
	if con != b || !slices.Equal(req.Reason, []proxypush.TriggerReason{proxypush.EndpointUpdate}) {
		t.Fatalf("second dequeued = %s %+v", con.id, req)
	}
}

func TestPushQueueEnqueueWhileProcessingRequeuesOnce(t *testing.T) {
	q := NewPushQueue()
	a := &Connection{id: "a"}
	q.Enqueue(a, reasons(proxypush.ConfigUpdate))
	con, _ := dequeueWithin(t, q, time.Second)
	if con != a {
		t.Fatal("want a")
	}
	// While a is being pushed, two more requests arrive: kept, not queued.
	q.Enqueue(a, reasons(proxypush.ServiceUpdate))
	q.Enqueue(a, reasons(proxypush.EndpointUpdate))
	if got := q.Pending(); got != 0 {
		t.Fatalf("Pending while processing = %d, want 0", got)
	}
	q.MarkDone(a)
	if got := q.Pending(); got != 1 {
		t.Fatalf("Pending after MarkDone = %d, want 1", got)
	}
	con, req := dequeueWithin(t, q, time.Second)
	if con != a || !slices.Equal(req.Reason, []proxypush.TriggerReason{proxypush.ServiceUpdate, proxypush.EndpointUpdate}) {
		t.Fatalf("re-queued = %s %+v, want a with [service endpoint]", con.id, req)
	}
	// Exactly once: done with nothing new arriving leaves the queue empty.
	q.MarkDone(a)
	if got := q.Pending(); got != 0 {
		t.Fatalf("Pending after second MarkDone = %d, want 0", got)
	}
}

// In a synctest bubble, synctest.Wait returns once Dequeue is blocked on
// the queue's condition variable, so "still blocked" and "woke up" are
// checked exactly, without a timeout.
func TestPushQueueDequeueBlocksUntilEnqueueAndShutDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewPushQueue()
		got := make(chan *Connection, 1)
		go func() {
			c, _, _, _ := q.Dequeue()
			got <- c
		}()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("Dequeue returned on an empty queue")
		default:
		}
		a := &Connection{id: "a"}
		q.Enqueue(a, reasons(proxypush.ConfigUpdate))
		synctest.Wait()
		select {
		case c := <-got:
			if c != a {
				t.Fatal("want a")
			}
		default:
			t.Fatal("Dequeue did not wake up after Enqueue")
		}

		done := make(chan bool, 1)
		go func() {
			_, _, _, shutdown := q.Dequeue()
			done <- shutdown
		}()
		synctest.Wait()
		q.ShutDown()
		synctest.Wait()
		select {
		case shutdown := <-done:
			if !shutdown {
				t.Fatal("Dequeue after ShutDown: shutdown = false")
			}
		default:
			t.Fatal("ShutDown did not wake Dequeue")
		}
		q.Enqueue(a, reasons(proxypush.ConfigUpdate))
		if q.Pending() != 0 {
			t.Fatal("Enqueue after ShutDown queued a push")
		}
	})
}

// TestPushQueueConcurrent runs producers and consumers together (run with
// -race) and checks the queue's invariants: a connection is never processed
// by two consumers at once, and every reason enqueued is delivered exactly
// once.
func TestPushQueueConcurrent(t *testing.T) {
	const (
		conns     = 20
		producers = 4
		perProd   = 500
		consumers = 8
	)
	q := NewPushQueue()
	cs := make([]*Connection, conns)
	for i := range cs {
		cs[i] = &Connection{id: fmt.Sprint(i)}
	}

	var (
		mu         sync.Mutex
		inFlight   = map[*Connection]bool{}
		delivered  int
		violations int
	)
	var consumersWG sync.WaitGroup
	for range consumers {
		consumersWG.Go(func() {
			for {
				con, req, _, shutdown := q.Dequeue()
				if shutdown {
					return
				}
				mu.Lock()
				if inFlight[con] {
					violations++
				}
				inFlight[con] = true
				delivered += len(req.Reason)
				mu.Unlock()
				time.Sleep(50 * time.Microsecond) // a push takes time
				mu.Lock()
				inFlight[con] = false
				mu.Unlock()
				q.MarkDone(con)
			}
		})
	}
	var producersWG sync.WaitGroup
	for p := range producers {
		producersWG.Go(func() {
			for i := range perProd {
				q.Enqueue(cs[(p*perProd+i)%conns], reasons(proxypush.ConfigUpdate))
			}
		})
	}
	producersWG.Wait()

	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		d := delivered
		mu.Unlock()
		if d == producers*perProd {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivered %d reasons, want %d", d, producers*perProd)
		}
		time.Sleep(time.Millisecond)
	}
	q.ShutDown()
	consumersWG.Wait()
	if violations > 0 {
		t.Fatalf("%d times a connection was dequeued while still processing", violations)
	}
}
