package cluster

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"sync"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"golang.org/x/net/http2"

	h2client "github.com/straitmesh/strait/internal/proxy/http2/client"
	"github.com/straitmesh/strait/internal/proxy/wbatch"
)

// defaultH2IdleTimeout closes an upstream HTTP/2 connection without streams
// (the HTTP/1.1 pools keep idle connections as long).
const defaultH2IdleTimeout = 60 * time.Second

// h2Pool is a cluster's HTTP/2 (prior knowledge, h2c) upstream pool. Each
// endpoint (and original source: such connections are never shared with
// another source) has multiplexed connections; a request takes a stream on
// the first one with room, and a new connection is dialed when none has:
// after a GOAWAY, or when every connection is at the server's
// SETTINGS_MAX_CONCURRENT_STREAMS or at the cluster's own
// max_concurrent_streams. Package http2/client speaks the protocol (its
// Conn, framed on x/net/http2's Framer); with STRAIT_H2_UPSTREAM=xnet in
// the environment, x/net/http2's Transport does instead, the pool being
// its ClientConnPool (the path this replaced, kept selectable until the
// new one has proven itself). Dialing stays the cluster's (connect
// timeout, upstream_bind_config, original_src).
type h2Pool struct {
	// Set at creation, read-only.
	c          *Cluster
	t          *http2.Transport // nil: the framed client (http2/client)
	cfg        h2client.Config
	maxStreams uint32 // the cluster's limit per connection; 0 means the server's only
	// maxRequests (max_requests_per_connection) and maxAge
	// (max_connection_duration) retire a connection: no new stream
	// goes on it, and it closes once its streams are done. 0: no limit.
	maxRequests uint32
	maxAge      time.Duration

	mu      sync.Mutex // guards conns, keys, nconns, dialing and life
	conns   map[h2Key][]h2Conn
	keys    map[h2Conn]h2Key
	nconns  map[h2Conn]net.Conn // for httptrace's GotConn
	dialing map[h2Key]*h2Dial
	life    map[h2Conn]*h2Life // only with maxRequests or maxAge
}

// h2Conn is an upstream HTTP/2 connection of either client.
type h2Conn interface {
	// Reserve reserves a stream for a request to come (false: the
	// connection takes no new stream).
	Reserve() bool
	// Streams counts the streams open and reserved.
	Streams() int
	// Shutdown takes no new stream and closes once the streams are done.
	Shutdown()
	Close() error
}

// xnetConn is x/net/http2's connection as an h2Conn.
type xnetConn struct{ cc *http2.ClientConn }

func (x xnetConn) Reserve() bool { return x.cc.ReserveNewRequest() }
func (x xnetConn) Streams() int {
	st := x.cc.State()
	return st.StreamsActive + st.StreamsReserved + st.StreamsPending
}
func (x xnetConn) Shutdown()    { _ = x.cc.Shutdown(context.Background()) }
func (x xnetConn) Close() error { return x.cc.Close() }

// h2Life is what retires a connection: streams sent on it and its age.
type h2Life struct {
	streams uint32
	expires time.Time // zero: never
	retired bool
}

// h2Key is what a connection may be shared by.
type h2Key struct {
	addr string
	src  connOwner
}

// h2Dial is a dial in progress; done is closed when it ends.
type h2Dial struct {
	done chan struct{}
	err  error
	cc   h2Conn // the new connection, when err is nil
}

var _ http2.ClientConnPool = (*h2Pool)(nil)

func newH2Pool(c *Cluster, s HTTP2Settings) *h2Pool {
	p := &h2Pool{
		c:           c,
		maxStreams:  s.MaxConcurrentStreams,
		maxRequests: s.MaxRequestsPerConnection,
		maxAge:      s.MaxConnectionDuration,
		conns:       map[h2Key][]h2Conn{},
		keys:        map[h2Conn]h2Key{},
		nconns:      map[h2Conn]net.Conn{},
		dialing:     map[h2Key]*h2Dial{},
		life:        map[h2Conn]*h2Life{},
	}
	idle := s.IdleTimeout
	if idle == 0 {
		idle = defaultH2IdleTimeout
	}
	if os.Getenv("STRAIT_H2_UPSTREAM") != "xnet" {
		p.cfg = h2client.Config{
			StreamWindow:      s.InitialStreamWindowSize,
			ConnWindow:        s.InitialConnectionWindowSize,
			MaxHeaderListSize: h2ResponseHeaderListSize,
			PingInterval:      s.KeepaliveInterval,
			PingTimeout:       s.KeepaliveTimeout,
			IdleTimeout:       idle,
			OnUnusable:        func(c *h2client.Conn) { p.forget(c) },
		}
		return p
	}
	// The receive windows are only settable through net/http's
	// HTTP2Config, which x/net/http2 reads from the Transport it
	// configures.
	t1 := &http.Transport{
		DisableCompression: true,
		IdleConnTimeout:    idle,
		HTTP2: &http.HTTP2Config{
			MaxReceiveBufferPerStream:     int(s.InitialStreamWindowSize),
			MaxReceiveBufferPerConnection: int(s.InitialConnectionWindowSize),
		},
	}
	t2, err := http2.ConfigureTransports(t1)
	if err != nil {
		// Only fails when t1 was already configured for HTTP/2.
		panic("cluster: configure HTTP/2 transport: " + err.Error())
	}
	t2.AllowHTTP = true
	t2.DisableCompression = true
	t2.IdleConnTimeout = idle
	t2.MaxHeaderListSize = h2ResponseHeaderListSize
	// x/net/http2's health check: after ReadIdleTimeout without a frame
	// it sends a PING and closes the connection (MarkDead, so the next
	// request dials anew) if nothing arrives within PingTimeout. Zero
	// ReadIdleTimeout sends no PINGs, as Envoy without an interval.
	t2.ReadIdleTimeout = s.KeepaliveInterval
	t2.PingTimeout = s.KeepaliveTimeout
	t2.ConnPool = p
	p.t = t2
	return p
}

// sourceKey is the request context key of an Endpoint's connOwner: the
// pool keeps the connections of each original source apart.
type sourceKey struct{}

// roundTrip sends req (whose URL host it rewrites to ep) on a stream.
func (p *h2Pool) roundTrip(req *http.Request, ep Endpoint) (*http.Response, error) {
	if ep.Network != "tcp" {
		return nil, ErrPipeEndpoint
	}
	req.URL.Host = ep.Address
	// The scheme is the request's :scheme (the HCM's, https or http); the
	// connection's TLS is the cluster's transport socket, whatever it says.
	if req.URL.Scheme != "https" {
		req.URL.Scheme = "http"
	}
	if o := ep.owner(); o.isValid() {
		req = req.WithContext(context.WithValue(req.Context(), sourceKey{}, o))
	}
	if p.t != nil {
		return p.t.RoundTrip(req)
	}
	// A request the connection refused before sending it (a GOAWAY or
	// the stream limit came first) takes another connection; a request
	// that was sent is never sent again here.
	for tries := 0; ; tries++ {
		cc, err := p.getConn(req, ep.Address)
		if err != nil {
			return nil, err
		}
		p.gotConn(req, cc)
		resp, err := cc.(*h2client.Conn).RoundTrip(req)
		if errors.Is(err, h2client.ErrConnUnusable) && tries < 3 && req.Context().Err() == nil {
			// Not attached after all: the next connection counts it.
			p.c.Stats.RqTotal.Add(^uint64(0))
			continue
		}
		return resp, err
	}
}

// gotConn tells req's httptrace.ClientTrace (GotConn) which connection
// it has, as net/http's Transport does (the access log's upstream
// addresses).
func (p *h2Pool) gotConn(req *http.Request, cc h2Conn) {
	if trace := httptrace.ContextClientTrace(req.Context()); trace != nil && trace.GotConn != nil {
		p.mu.Lock()
		nc := p.nconns[cc]
		p.mu.Unlock()
		if nc != nil {
			trace.GotConn(httptrace.GotConnInfo{Conn: nc})
		}
	}
}

// GetClientConn returns a connection with a stream reserved for req,
// and tells req's httptrace.ClientTrace (GotConn) which connection it
// is, as net/http's Transport does (the access log's upstream
// addresses).
func (p *h2Pool) GetClientConn(req *http.Request, addr string) (*http2.ClientConn, error) {
	cc, err := p.getConn(req, addr)
	if err != nil {
		return nil, err
	}
	p.gotConn(req, cc)
	return cc.(xnetConn).cc, nil
}

// getConn returns a connection with a stream reserved for req.
func (p *h2Pool) getConn(req *http.Request, addr string) (h2Conn, error) {
	key := h2Key{addr: addr}
	key.src, _ = req.Context().Value(sourceKey{}).(connOwner)
	waited := false // the request was counted as pending
	for {
		p.mu.Lock()
		for _, cc := range p.conns[key] {
			if p.hasRoom(cc) && p.usable(cc) && cc.Reserve() {
				p.counted(cc)
				p.mu.Unlock()
				return cc, nil
			}
		}
		d := p.dialing[key]
		if d == nil && req.Context().Err() != nil {
			// No dial for a request already gone (a stream its client
			// reset): the dial would outlive it.
			p.mu.Unlock()
			return nil, req.Context().Err()
		}
		if d == nil && !p.c.breaker.tryConn() {
			// max_connections: share a connection past the cluster's
			// stream limit rather than open another; with none to
			// share, the request overflows (streams do not queue).
			for _, cc := range p.conns[key] {
				if p.usable(cc) && cc.Reserve() {
					p.counted(cc)
					p.mu.Unlock()
					return cc, nil
				}
			}
			p.mu.Unlock()
			p.c.breaker.st.cxOverflow.Add(1)
			p.c.breaker.st.pendingOverflow.Add(1)
			return nil, ErrOverflow
		}
		if d == nil {
			d = &h2Dial{done: make(chan struct{})}
			p.dialing[key] = d
			p.mu.Unlock()
			// The dial serves every request waiting on key, so this
			// request's cancellation must not end it; connect_timeout does.
			go p.dial(context.WithoutCancel(req.Context()), key, d)
		} else {
			p.mu.Unlock()
		}
		// Waiting for a dial, the request is pending (Envoy's pending
		// stream); a dial that fails fails it (pending_failure_eject).
		b := p.c.breaker
		if waited { // counted once per request, in pending_active per wait
			b.st.pendingActive.Add(1)
		} else {
			b.pendingStart()
			waited = true
		}
		select {
		case <-d.done:
		case <-req.Context().Done():
			b.pendingEnd(false)
			return nil, req.Context().Err()
		}
		b.pendingEnd(d.err != nil)
		if d.err != nil {
			return nil, d.err
		}
		// The requests that waited for a dial take their stream on the
		// new connection even if its max_connection_duration is already
		// over (as a pending stream attaches when its connection is up),
		// or the pool would dial without end.
		p.mu.Lock()
		if _, open := p.keys[d.cc]; open && p.hasRoom(d.cc) && p.underMaxRequests(d.cc) && d.cc.Reserve() {
			p.counted(d.cc)
			p.mu.Unlock()
			return d.cc, nil
		}
		p.mu.Unlock()
	}
}

// underMaxRequests reports whether cc has carried fewer streams than
// max_requests_per_connection (p.mu held).
func (p *h2Pool) underMaxRequests(cc h2Conn) bool {
	l := p.life[cc]
	return l == nil || p.maxRequests == 0 || l.streams < p.maxRequests
}

// usable reports whether cc may take a new stream under
// max_requests_per_connection and max_connection_duration; a connection
// that may not is retired: it closes once its streams are done (p.mu held).
func (p *h2Pool) usable(cc h2Conn) bool {
	l := p.life[cc]
	if l == nil {
		return true
	}
	if !l.retired && (p.maxRequests > 0 && l.streams >= p.maxRequests || !l.expires.IsZero() && !time.Now().Before(l.expires)) {
		l.retired = true
		// Shutdown waits for the streams in flight, then closes (on its
		// own goroutine: it may call back into the pool).
		go cc.Shutdown()
	}
	return !l.retired
}

// counted counts a stream reserved on cc (p.mu held): the request is
// attached to a connection (upstream_rq_total).
func (p *h2Pool) counted(cc h2Conn) {
	p.c.attached()
	if l := p.life[cc]; l != nil {
		l.streams++
	}
}

// hasRoom applies the cluster's max_concurrent_streams (the server's limit
// is checked by ReserveNewRequest).
func (p *h2Pool) hasRoom(cc h2Conn) bool {
	return p.maxStreams == 0 || uint32(cc.Streams()) < p.maxStreams
}

func (p *h2Pool) dial(ctx context.Context, key h2Key, d *h2Dial) {
	var cc h2Conn
	nc, err := p.c.Dial(ctx, Endpoint{Network: "tcp", Address: key.addr, Source: key.src.Source, Downstream: key.src.Downstream})
	if err == nil {
		// Batch the connection's writes across its streams (package
		// wbatch); x/net's Transport also flushes a request's HEADERS
		// and DATA apart.
		nc = wbatch.New(nc)
		if p.t != nil {
			var xc *http2.ClientConn
			if xc, err = p.t.NewClientConn(nc); err == nil {
				cc = xnetConn{xc}
			}
		} else {
			var fc *h2client.Conn
			if fc, err = h2client.New(nc, p.cfg); err == nil {
				cc = fc
			}
		}
		if err != nil {
			nc.Close()
		}
	}
	p.mu.Lock()
	if err == nil {
		p.conns[key] = append(p.conns[key], cc)
		p.keys[cc] = key
		p.nconns[cc] = nc
		if p.maxRequests > 0 || p.maxAge > 0 {
			l := &h2Life{}
			if p.maxAge > 0 {
				l.expires = time.Now().Add(p.maxAge)
			}
			p.life[cc] = l
		}
	} else {
		p.c.breaker.releaseConn()
	}
	delete(p.dialing, key)
	d.err, d.cc = err, cc
	p.mu.Unlock()
	close(d.done)
	if fc, ok := cc.(*h2client.Conn); ok && !fc.Usable() {
		p.forget(fc) // a GOAWAY before the pool knew the connection
	}
}

// MarkDead forgets cc (closed, or after GOAWAY); x/net/http2 calls it.
func (p *h2Pool) MarkDead(cc *http2.ClientConn) { p.forget(xnetConn{cc}) }

// forget forgets cc, which takes no new stream (closed, or after GOAWAY).
func (p *h2Pool) forget(cc h2Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key, ok := p.keys[cc]
	if !ok {
		return
	}
	delete(p.keys, cc)
	delete(p.nconns, cc)
	delete(p.life, cc)
	p.c.breaker.releaseConn() // its max_connections slot, taken by GetClientConn
	list := p.conns[key]
	for i, c := range list {
		if c == cc {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(p.conns, key)
	} else {
		p.conns[key] = list
	}
}

// closeIdle closes the connections without streams; the others end when
// their last stream does and the idle timeout passes.
func (p *h2Pool) closeIdle() {
	p.mu.Lock()
	var idle []h2Conn
	for cc := range p.keys {
		if cc.Streams() == 0 {
			idle = append(idle, cc)
		}
	}
	p.mu.Unlock()
	for _, cc := range idle {
		cc.Close() // calls forget
	}
}

// buildHTTP2 reads the cluster's upstream HTTP protocol and makes its
// HTTP/2 pool when it may speak HTTP/2.
func (c *Cluster) buildHTTP2(cfg *clusterv3.Cluster) error {
	proto, s, err := httpProtocol(cfg)
	if err != nil {
		return err
	}
	c.proto = proto
	if proto != UpstreamHTTP1 {
		c.h2 = newH2Pool(c, s)
	}
	return nil
}

// UpstreamHTTP2 reports whether a request to c goes upstream in HTTP/2;
// downstreamH2 says whether it came downstream in HTTP/2 (for clusters
// that use the downstream protocol).
func (c *Cluster) UpstreamHTTP2(downstreamH2 bool) bool {
	return c.proto == UpstreamHTTP2 || c.proto == UpstreamDownstream && downstreamH2
}

// Protocol returns the cluster's upstream protocol setting.
func (c *Cluster) Protocol() UpstreamProtocol { return c.proto }
