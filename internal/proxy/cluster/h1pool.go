package cluster

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/straitmesh/strait/internal/proxy/cluster/idlewatch"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// maxIdlePerEndpoint bounds the idle keep-alive connections kept per
// upstream endpoint.
const maxIdlePerEndpoint = 1024

// defaultIdleTimeout is Envoy's default upstream idle_timeout
// (common_http_protocol_options).
const defaultIdleTimeout = time.Hour

// sweepInterval is how often idle pooled connections are checked for a
// close or unsolicited bytes from the upstream, so that a connection the
// upstream closed doesn't sit in CLOSE_WAIT until its idle timeout.
const sweepInterval = 2 * time.Second

// UpstreamConn is one HTTP/1.1 connection of a cluster's upstream pool,
// used by one request at a time. Return it with PutConn when the exchange
// left it reusable, else Close it.
type UpstreamConn struct {
	// What the pool reads when it takes an idle connection (usable)
	// comes first and fills the first cache line (UpstreamConn's size is
	// a multiple of 64, so its allocations are aligned to 64 bytes): of
	// the pool's 1,000 connections of a gateway, the one taken is cold.
	idleSince int64 // coarseNow when it became idle
	expires   int64 // coarseNow after which it is not reused (max_connection_duration); 0: never
	// w is the socket in the process's idle watch (package idlewatch);
	// not watched (its zero value): checked with a Peek when reused.
	w idlewatch.Conn

	net.Conn // D
	// D sets the connection's read and write timeouts.
	D *http1.DeadlineConn
	R *http1.Reader
	// Reused is set when the connection came from the idle pool: a failure
	// before any response byte may just mean the upstream closed it while
	// idle, and a request that can be replayed may be retried on a new one.
	Reused bool
	uses   uint32 // requests sent on it
	// PeerPrincipal and LocalPrincipal are the SPIFFE identities (first
	// URI SANs) of the upstream's certificate and of the one the proxy
	// presented, "" without TLS (tlsconf.UpstreamPrincipals).
	PeerPrincipal, LocalPrincipal string

	addr string
	src  connOwner // original_src or PROXY protocol: pooled apart, per owner
	// slot is the cluster's circuit breaker holding this connection's
	// max_connections slot; released once, by Close.
	slot *breaker
	// resp is where RoundTrip parses response heads (h1roundtrip.go), so
	// that its fields slice is reused.
	resp http1.Response
	_    [upstreamConnPad]byte
}

// upstreamConnPad rounds UpstreamConn up to a multiple of 64 bytes on
// Linux (TestUpstreamConnLayout).
const upstreamConnPad = 48

// Close closes the connection, releases its buffer and gives its slot back
// to the cluster's connection limit.
func (u *UpstreamConn) Close() error {
	err := u.Conn.Close()
	if u.R != nil {
		u.R.Release()
		u.R = nil
	}
	if b := u.slot; b != nil {
		u.slot = nil
		b.releaseConn()
	}
	u.w.Forget()
	return err
}

// h1Pool is a cluster's idle HTTP/1.1 connections by endpoint address.
// Connections bound to a downstream client's address (original_src) are
// kept apart, by endpoint and source, so that a request never leaves from
// another client's address.
type h1Pool struct {
	// Set at creation, read-only.
	idleTimeout int64  // seconds; 0: none
	maxRequests uint32 // per connection; 0: no limit
	maxDuration int64  // seconds a connection is reused for; 0: no limit
	// watch is the process's idle watch (the cluster manager's); nil: idle
	// connections are checked with a Peek when reused.
	watch *idlewatch.Watch

	mu       sync.Mutex // guards the fields below
	idle     map[string][]*UpstreamConn
	idleSrc  map[srcKey][]*UpstreamConn
	closed   bool
	sweeping bool // a sweep goroutine runs
}

// srcKey identifies the connections of one endpoint and one original source.
type srcKey struct {
	addr string
	src  connOwner
}

// GetConn returns an idle connection to ep, or dials a new one. When the
// cluster's max_connections are all open, the request waits as a pending
// request for one to free (max_pending_requests; ErrOverflow beyond). A
// connection returned counts the request in upstream_rq_total (attached).
func (c *Cluster) GetConn(ctx context.Context, ep Endpoint) (*UpstreamConn, error) {
	if ep.Network != "tcp" {
		return nil, ErrPipeEndpoint
	}
	// pending: the request found no idle connection and waits for a
	// dial or a free slot (Envoy's pending request), counted once.
	pending := false
	for {
		var uc *UpstreamConn
		if o := ep.owner(); o.isValid() {
			uc = c.h1.getSrc(srcKey{ep.Address, o})
		} else {
			uc = c.h1.get(ep.Address)
		}
		if uc != nil {
			uc.R.UnparkBuffer()
			if pending {
				c.breaker.pendingEnd(false)
			}
			c.attached()
			return uc, nil
		}
		if !c.breaker.tryConn() {
			if err := c.waitForConn(ctx, pending); err != nil {
				if pending {
					c.breaker.pendingEnd(false)
				}
				return nil, err
			}
			pending = true
			continue
		}
		if !pending {
			c.breaker.pendingStart()
		}
		uc, err := c.dialConn(ctx, ep)
		c.breaker.pendingEnd(err != nil)
		if err == nil {
			c.attached()
		}
		return uc, err
	}
}

// Exchange counts a request sent on uc (max_requests_per_connection).
func (u *UpstreamConn) Exchange() { u.uses++ }

// DialConn always opens a new connection to ep, for one request that it
// counts in upstream_rq_total (attached) once connected. It returns
// ErrOverflow, counting upstream_cx_overflow, when the cluster's
// max_connections are all open.
func (c *Cluster) DialConn(ctx context.Context, ep Endpoint) (*UpstreamConn, error) {
	if ep.Network != "tcp" {
		return nil, ErrPipeEndpoint
	}
	if !c.breaker.tryConn() {
		return nil, ErrOverflow
	}
	uc, err := c.dialConn(ctx, ep)
	if err == nil {
		c.attached()
	}
	return uc, err
}

// ReplaceConn swaps old, a connection GetConn gave a request that turned
// out closed before the request got a response byte (the upstream closed
// it while it was idle in the pool), for a fresh connection to ep: old is
// closed, which gives its max_connections slot back for the new one, and
// the request, counted in upstream_rq_total when it got old, is not
// counted again. The request is still one upstream request, as when
// Envoy's pool sees the close before it attaches the stream; a retry of
// the router's is another, and gets its connection from GetConn. It
// returns ErrOverflow when the cluster's max_connections are all open.
func (c *Cluster) ReplaceConn(ctx context.Context, ep Endpoint, old *UpstreamConn) (*UpstreamConn, error) {
	// Closed already when the caller saw it fail: Close is idempotent, and
	// its error (a second close) says nothing about the new connection.
	_ = old.Close()
	if ep.Network != "tcp" {
		return nil, ErrPipeEndpoint
	}
	if !c.breaker.tryConn() {
		return nil, ErrOverflow
	}
	return c.dialConn(ctx, ep)
}

// dialConn is DialConn once the connection slot is taken.
func (c *Cluster) dialConn(ctx context.Context, ep Endpoint) (*UpstreamConn, error) {
	nc, err := c.Dial(ctx, ep)
	if err != nil {
		c.breaker.releaseConn()
		return nil, err
	}
	raw := http1.WrapConn(nc)
	d := http1.NewDeadlineConn(raw)
	uc := &UpstreamConn{Conn: d, D: d, R: http1.NewReader(d), addr: ep.Address, src: ep.owner(), slot: c.breaker}
	c.h1.watch.AddTo(raw, &uc.w)
	uc.PeerPrincipal, uc.LocalPrincipal = tlsconf.UpstreamPrincipals(nc)
	if c.h1.maxDuration > 0 {
		uc.expires = coarseClock() + c.h1.maxDuration
	}
	return uc, nil
}

// PutConn returns a connection whose last exchange completed cleanly (the
// whole response read, nothing after it) to the idle pool. From then on,
// anything the upstream sends on it (bytes or a close) retires it: it is
// checked when taken out and by a periodic sweep, so that a late or
// unsolicited response is never read as the answer to another request.
func (c *Cluster) PutConn(uc *UpstreamConn) {
	if len(uc.R.Buffered()) != 0 || c.h1.maxRequests > 0 && uc.uses >= c.h1.maxRequests ||
		uc.expires != 0 && coarseClock() >= uc.expires {
		uc.Close() // unsolicited bytes (the framing is off), or used up
		return
	}
	uc.D.SetReadTimeouts(0, time.Time{})
	uc.D.SetWriteTimeouts(0, time.Time{})
	// An idle connection holds no read buffer: the next request on any
	// connection takes the one this one gives back, still in the CPU's
	// cache, instead of this connection's own, cold after the other
	// connections' turns (a gateway's 1,000 upstream connections held
	// 8 MiB of buffers; the response was copied into a cold one).
	uc.R.ParkBuffer()
	if !c.h1.put(uc) {
		uc.Close()
		return
	}
	c.breaker.signal() // a pending request may take it
}

// coarseClock is the time in seconds, from the codec's coarse clock (the
// request path doesn't read the real one).
func coarseClock() int64 { return http1.CoarseNow().Unix() }

func (p *h1Pool) get(addr string) *UpstreamConn {
	now := coarseClock()
	p.mu.Lock()
	for {
		l := p.idle[addr]
		if len(l) == 0 {
			p.mu.Unlock()
			return nil
		}
		uc := l[len(l)-1]
		l[len(l)-1] = nil
		p.idle[addr] = l[:len(l)-1]
		if p.usable(uc, now) {
			p.mu.Unlock()
			uc.Reused = true
			return uc
		}
		go uc.Close()
	}
}

// getSrc is get for connections with an original source.
func (p *h1Pool) getSrc(k srcKey) *UpstreamConn {
	now := coarseClock()
	p.mu.Lock()
	for {
		l := p.idleSrc[k]
		if len(l) == 0 {
			p.mu.Unlock()
			return nil
		}
		uc := l[len(l)-1]
		l[len(l)-1] = nil
		if len(l) == 1 {
			delete(p.idleSrc, k) // sources come and go: don't keep their keys
		} else {
			p.idleSrc[k] = l[:len(l)-1]
		}
		if p.usable(uc, now) {
			p.mu.Unlock()
			uc.Reused = true
			return uc
		}
		go uc.Close()
	}
}

// usable reports whether an idle connection can carry a request: not
// expired, and nothing (no byte, no close) arrived from the upstream since
// it became idle. The idle watch usually knows (no system call); else the
// check is one non-blocking MSG_PEEK recv.
func (p *h1Pool) usable(uc *UpstreamConn, now int64) bool {
	if p.idleTimeout > 0 && now-uc.idleSince >= p.idleTimeout || uc.expires != 0 && now >= uc.expires {
		return false
	}
	switch uc.w.State() {
	case idlewatch.Clean:
		return true
	case idlewatch.Dirty:
		return false
	}
	return http1.Peek(uc.Conn) == http1.PeekQuiet
}

// sweep closes idle connections that expired or heard from the upstream,
// every sweepInterval, until the pool is empty or closed.
func (p *h1Pool) sweep() {
	for {
		time.Sleep(sweepInterval)
		now := coarseClock()
		var dead []*UpstreamConn
		p.mu.Lock()
		for k, l := range p.idle {
			keep := l[:0]
			for _, uc := range l {
				if p.usable(uc, now) {
					keep = append(keep, uc)
				} else {
					dead = append(dead, uc)
				}
			}
			clear(l[len(keep):])
			if len(keep) == 0 {
				delete(p.idle, k)
			} else {
				p.idle[k] = keep
			}
		}
		for k, l := range p.idleSrc {
			keep := l[:0]
			for _, uc := range l {
				if p.usable(uc, now) {
					keep = append(keep, uc)
				} else {
					dead = append(dead, uc)
				}
			}
			clear(l[len(keep):])
			if len(keep) == 0 {
				delete(p.idleSrc, k)
			} else {
				p.idleSrc[k] = keep
			}
		}
		done := p.closed || len(p.idle) == 0 && len(p.idleSrc) == 0
		if done {
			p.sweeping = false
		}
		p.mu.Unlock()
		for _, uc := range dead {
			uc.Close()
		}
		if done {
			return
		}
	}
}

func (p *h1Pool) put(uc *UpstreamConn) bool {
	uc.idleSince = coarseClock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if !p.sweeping {
		p.sweeping = true
		go p.sweep()
	}
	if uc.src.isValid() {
		if p.idleSrc == nil {
			p.idleSrc = map[srcKey][]*UpstreamConn{}
		}
		k := srcKey{uc.addr, uc.src}
		l := p.idleSrc[k]
		if len(l) >= maxIdlePerEndpoint {
			return false
		}
		p.idleSrc[k] = append(l, uc)
		return true
	}
	if p.idle == nil {
		p.idle = map[string][]*UpstreamConn{}
	}
	l := p.idle[uc.addr]
	if len(l) >= maxIdlePerEndpoint {
		return false
	}
	p.idle[uc.addr] = append(l, uc)
	return true
}

// closeOneIdle closes one idle connection, if there is one, freeing its
// connection slot; it reports whether it did.
func (p *h1Pool) closeOneIdle() bool {
	var victim *UpstreamConn
	p.mu.Lock()
	for k, l := range p.idle {
		if len(l) == 0 {
			continue // get keeps an endpoint's key when it empties its list
		}
		victim = l[0]
		if len(l) == 1 {
			delete(p.idle, k)
		} else {
			p.idle[k] = append(l[:0], l[1:]...)
			clear(l[len(l)-1:])
		}
		break
	}
	if victim == nil {
		for k, l := range p.idleSrc {
			if len(l) == 0 {
				continue
			}
			victim = l[0]
			if len(l) == 1 {
				delete(p.idleSrc, k)
			} else {
				p.idleSrc[k] = append(l[:0], l[1:]...)
				clear(l[len(l)-1:])
			}
			break
		}
	}
	p.mu.Unlock()
	if victim == nil {
		return false
	}
	victim.Close()
	return true
}

// closeIdle closes the idle connections; with final, the pool stops keeping
// connections (the cluster was removed).
func (p *h1Pool) closeIdle(final bool) {
	p.mu.Lock()
	idle, idleSrc := p.idle, p.idleSrc
	p.idle, p.idleSrc = nil, nil
	if final {
		p.closed = true
	}
	p.mu.Unlock()
	for _, l := range idle {
		for _, uc := range l {
			uc.Close()
		}
	}
	for _, l := range idleSrc {
		for _, uc := range l {
			uc.Close()
		}
	}
}
