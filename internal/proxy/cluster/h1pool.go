package cluster

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/straitmesh/strait/internal/proxy/hcm/http1"
)

// maxIdlePerEndpoint bounds the idle keep-alive connections kept per
// upstream endpoint.
const maxIdlePerEndpoint = 1024

// idleTimeout is how long an idle upstream connection is kept (what the
// net/http pool used).
const idleTimeout = 60 * time.Second

// UpstreamConn is one HTTP/1.1 connection of a cluster's upstream pool,
// used by one request at a time. Return it with PutConn when the exchange
// left it reusable, else Close it.
type UpstreamConn struct {
	net.Conn
	R *http1.Reader
	// Reused is set when the connection came from the idle pool: a failure
	// before any response byte may just mean the upstream closed it while
	// idle, and a request that can be replayed may be retried on a new one.
	Reused bool

	addr      string
	src       OriginalSource // original_src: pooled apart, per source
	idleSince int64          // coarseNow when it became idle
}

// Close closes the connection and releases its buffer.
func (u *UpstreamConn) Close() error {
	err := u.Conn.Close()
	if u.R != nil {
		u.R.Release()
		u.R = nil
	}
	return err
}

// h1Pool is a cluster's idle HTTP/1.1 connections by endpoint address.
// Connections bound to a downstream client's address (original_src) are
// kept apart, by endpoint and source, so that a request never leaves from
// another client's address.
type h1Pool struct {
	mu      sync.Mutex // guards idle, idleSrc and closed
	idle    map[string][]*UpstreamConn
	idleSrc map[srcKey][]*UpstreamConn
	closed  bool
}

// srcKey identifies the connections of one endpoint and one original source.
type srcKey struct {
	addr string
	src  OriginalSource
}

// GetConn returns an idle connection to ep, or dials a new one.
func (c *Cluster) GetConn(ctx context.Context, ep Endpoint) (*UpstreamConn, error) {
	if ep.Network != "tcp" {
		return nil, ErrPipeEndpoint
	}
	if ep.Source.IsValid() {
		if uc := c.h1.getSrc(srcKey{ep.Address, ep.Source}); uc != nil {
			return uc, nil
		}
		return c.DialConn(ctx, ep)
	}
	if uc := c.h1.get(ep.Address); uc != nil {
		return uc, nil
	}
	return c.DialConn(ctx, ep)
}

// DialConn always opens a new connection to ep.
func (c *Cluster) DialConn(ctx context.Context, ep Endpoint) (*UpstreamConn, error) {
	if ep.Network != "tcp" {
		return nil, ErrPipeEndpoint
	}
	nc, err := c.Dial(ctx, ep)
	if err != nil {
		return nil, err
	}
	nc = http1.WrapConn(nc)
	return &UpstreamConn{Conn: nc, R: http1.NewReader(nc), addr: ep.Address, src: ep.Source}, nil
}

// PutConn returns a connection whose last exchange completed cleanly to the
// idle pool.
func (c *Cluster) PutConn(uc *UpstreamConn) {
	if len(uc.R.Buffered()) != 0 {
		uc.Close() // unsolicited bytes: the framing is off
		return
	}
	if !c.h1.put(uc) {
		uc.Close()
	}
}

// coarseNow is a clock in seconds for idle expiry, ticked by one goroutine,
// so that the request path doesn't read the clock (which is a real system
// call on VMs without a TSC clock source) twice per request.
var (
	coarseNow     atomic.Int64
	coarseStarted sync.Once
)

func coarseClock() int64 {
	coarseStarted.Do(func() {
		coarseNow.Store(time.Now().Unix())
		go func() {
			for t := range time.Tick(time.Second) {
				coarseNow.Store(t.Unix())
			}
		}()
	})
	return coarseNow.Load()
}

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
		if now-uc.idleSince < int64(idleTimeout/time.Second) {
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
		if now-uc.idleSince < int64(idleTimeout/time.Second) {
			p.mu.Unlock()
			uc.Reused = true
			return uc
		}
		go uc.Close()
	}
}

func (p *h1Pool) put(uc *UpstreamConn) bool {
	uc.idleSince = coarseClock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if uc.src.IsValid() {
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
