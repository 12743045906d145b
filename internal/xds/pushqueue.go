package xds

import (
	"sync"
	"time"

	"github.com/straitmesh/strait/internal/proxypush"
)

// PushQueue holds the connections that have a push waiting, each at most
// once (the queue/pending/processing design of Istio's pilot/pkg/xds/pushqueue.go):
//
//   - Enqueue for a connection already pending merges into its pending
//     request.
//   - Enqueue for a connection being pushed right now (dequeued, not yet
//     MarkDone) keeps the request in processing; MarkDone re-queues it once.
//   - Dequeue blocks until a connection is queued or the queue is shut down.
//
// All methods are safe for concurrent use.
type PushQueue struct {
	// cond.L guards every field below.
	cond *sync.Cond

	// queue is the FIFO of connections to push; each appears at most once
	// and always has an entry in pending.
	queue []*Connection
	// pending holds the merged request of each queued connection.
	pending map[*Connection]*proxypush.PushRequest
	// enqueuedAt holds when each queued connection entered the queue.
	enqueuedAt map[*Connection]time.Time
	// processing holds the connections between Dequeue and MarkDone. The
	// value is nil until a request arrives during the push.
	processing map[*Connection]*proxypush.PushRequest

	shuttingDown bool
}

// NewPushQueue returns an empty queue.
func NewPushQueue() *PushQueue {
	return &PushQueue{
		cond:       sync.NewCond(&sync.Mutex{}),
		pending:    make(map[*Connection]*proxypush.PushRequest),
		enqueuedAt: make(map[*Connection]time.Time),
		processing: make(map[*Connection]*proxypush.PushRequest),
	}
}

// Enqueue adds a push for con, merging it with one already waiting.
func (p *PushQueue) Enqueue(con *Connection, req *proxypush.PushRequest) {
	p.cond.L.Lock()
	defer p.cond.L.Unlock()
	if p.shuttingDown {
		return
	}
	// Being pushed now: keep the request for MarkDone.
	if r, busy := p.processing[con]; busy {
		p.processing[con] = r.Merge(req)
		return
	}
	// Already waiting: it has not been sent yet, so merge.
	if r, ok := p.pending[con]; ok {
		p.pending[con] = r.Merge(req)
		return
	}
	p.pending[con] = req
	p.enqueuedAt[con] = time.Now()
	p.queue = append(p.queue, con)
	p.cond.Signal()
}

// Dequeue removes the connection at the head of the queue and marks it as
// processing. It blocks while the queue is empty. shutdown is true (and con
// nil) once ShutDown was called.
func (p *PushQueue) Dequeue() (con *Connection, req *proxypush.PushRequest, queued time.Duration, shutdown bool) {
	p.cond.L.Lock()
	defer p.cond.L.Unlock()
	for len(p.queue) == 0 && !p.shuttingDown {
		p.cond.Wait()
	}
	if p.shuttingDown {
		return nil, nil, 0, true
	}
	con = p.queue[0]
	p.queue[0] = nil // let the connection be collected once it is done
	p.queue = p.queue[1:]
	req = p.pending[con]
	delete(p.pending, con)
	queued = time.Since(p.enqueuedAt[con])
	delete(p.enqueuedAt, con)
	// Key only: a request arriving during the push is merged in here.
	p.processing[con] = nil
	return con, req, queued, false
}

// MarkDone ends the push of con started by Dequeue. A request that arrived
// meanwhile is queued again, once.
func (p *PushQueue) MarkDone(con *Connection) {
	p.cond.L.Lock()
	defer p.cond.L.Unlock()
	r := p.processing[con]
	delete(p.processing, con)
	if r == nil || p.shuttingDown {
		return
	}
	p.pending[con] = r
	p.enqueuedAt[con] = time.Now()
	p.queue = append(p.queue, con)
	p.cond.Signal()
}

// Pending returns the number of connections waiting to be pushed.
func (p *PushQueue) Pending() int {
	p.cond.L.Lock()
	defer p.cond.L.Unlock()
	return len(p.queue)
}

// ShutDown wakes every Dequeue, which then report shutdown. Later Enqueues
// are dropped.
func (p *PushQueue) ShutDown() {
	p.cond.L.Lock()
	defer p.cond.L.Unlock()
	p.shuttingDown = true
	p.cond.Broadcast()
}
