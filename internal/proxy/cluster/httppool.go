package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// httpPool is a cluster's HTTP/1.1 upstream connection pool, keyed by
// endpoint address, with keep-alive. It is behind RoundTrip so the codec can
// be replaced without touching callers. Its transports are made on the
// first request: most clusters of a sidecar's configuration never carry
// one through net/http, and two idle transports cost ~1 KiB per cluster.
type httpPool struct {
	c *Cluster // set at creation, read-only

	mu sync.Mutex // serializes making ts
	ts atomic.Pointer[httpTransports]
}

type httpTransports struct {
	t *http.Transport
	// src carries requests with an original source (original_src): its
	// connections are bound to the source that sourceKey{} in the request
	// context names, so it never keeps them for another request.
	src *http.Transport
}

// sourceKey is the request context key of an Endpoint's connOwner.
type sourceKey struct{}

func newHTTPPool(c *Cluster) *httpPool { return &httpPool{c: c} }

// transports returns the pool's transports, making them on first use.
func (p *httpPool) transports() *httpTransports {
	if ts := p.ts.Load(); ts != nil {
		return ts
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ts := p.ts.Load(); ts != nil {
		return ts
	}
	c := p.c
	ts := &httpTransports{
		t: newTransport(func(ctx context.Context, network, addr string) (net.Conn, error) {
			return c.dialSlot(ctx, Endpoint{Network: "tcp", Address: addr})
		}),
		src: newTransport(func(ctx context.Context, network, addr string) (net.Conn, error) {
			o, _ := ctx.Value(sourceKey{}).(connOwner)
			return c.dialSlot(ctx, Endpoint{Network: "tcp", Address: addr, Source: o.Source, Downstream: o.Downstream})
		}),
	}
	ts.src.DisableKeepAlives = true
	p.ts.Store(ts)
	return ts
}

func newTransport(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	return &http.Transport{
		DialContext:           dial,
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   4096,
		IdleConnTimeout:       60 * time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
		TLSNextProto:          map[string]func(string, *tls.Conn) http.RoundTripper{},
		WriteBufferSize:       16 << 10,
		ReadBufferSize:        16 << 10,
		ExpectContinueTimeout: 0,
		// Its 10 MiB default would let a response head through that
		// the strait codec refuses (CheckResponseHead).
		MaxResponseHeaderBytes: MaxResponseHeadBytes,
	}
}

// ErrPipeEndpoint is returned for HTTP requests to a unix-socket endpoint.
var ErrPipeEndpoint = errors.New("pipe endpoints are not supported for HTTP upstreams")

// RoundTrip sends req (whose URL host the pool rewrites to ep) upstream.
// The caller owns the response body. It counts upstream_rq_total once the
// request has a connection (see attached).
func (c *Cluster) RoundTrip(req *http.Request, ep Endpoint) (*http.Response, error) {
	if c.UpstreamHTTP2(req.ProtoMajor == 2) {
		return c.h2.roundTrip(req, ep) // h2Pool.counted counts
	}
	if ep.Network != "tcp" {
		return nil, ErrPipeEndpoint
	}
	resp, err := c.roundTripH1(req, ep)
	// net/http does not say whether the request got a connection: it did
	// unless the circuit breaker refused it or the dial failed.
	var de *dialError
	if err == nil || !errors.Is(err, ErrOverflow) && !errors.As(err, &de) {
		c.attached()
	}
	return resp, err
}

// attached counts a request that got an upstream connection:
// upstream_rq_total, which Envoy counts when its connection pool attaches
// a stream to a connection (ConnPoolImplBase::attachStreamToClient), so a
// request the circuit breaker refuses (upstream_rq_pending_overflow) or
// whose connection could not be made is not in it.
func (c *Cluster) attached() { c.Stats.RqTotal.Add(1) }

// dialError marks a failed dial of the net/http pool, so that RoundTrip
// can tell a request that never had a connection.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

func (c *Cluster) roundTripH1(req *http.Request, ep Endpoint) (*http.Response, error) {
	req.URL.Host = ep.Address
	// The transport's TLS is the cluster's transport socket (its dialer),
	// not the request's scheme: net/http would start TLS on its own for
	// https.
	req.URL.Scheme = "http"
	// net/http dials with the request context's values but not its
	// cancellation: dialSlot finds the request's context under dialForKey.
	ctx := context.WithValue(req.Context(), dialForKey{}, req.Context())
	if o := ep.owner(); o.isValid() {
		req = req.WithContext(context.WithValue(ctx, sourceKey{}, o))
		return c.pool.transports().src.RoundTrip(req)
	}
	return c.pool.transports().t.RoundTrip(req.WithContext(ctx))
}

// dialForKey is the context key of the context of the request a dial of
// the net/http pool is for.
type dialForKey struct{}

func (p *httpPool) closeIdle() {
	if ts := p.ts.Load(); ts != nil {
		ts.t.CloseIdleConnections()
		ts.src.CloseIdleConnections()
	}
}

// dialSlot is Dial within the cluster's max_connections (ErrOverflow when
// none is free: net/http's pool has no pending queue of ours); the slot is
// given back when the connection closes.
//
// net/http keeps dialing when the request that started the dial is
// cancelled, and pools the connection it gets. A request cancelled by
// its client (an HTTP/2 stream reset, as in a rapid reset flood) would
// leave a connection per stream idle in the pool for its idle timeout,
// so the dial ends with the request, as Envoy cancels a pending stream's
// excess connection attempt (ConnPoolImplBase::onPendingStreamCancel,
// CancelPolicy::CloseExcess); a dial that completes after the request
// was cancelled is closed.
func (c *Cluster) dialSlot(ctx context.Context, ep Endpoint) (net.Conn, error) {
	reqCtx, _ := ctx.Value(dialForKey{}).(context.Context)
	if reqCtx != nil {
		if err := reqCtx.Err(); err != nil {
			return nil, &dialError{err}
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(reqCtx, cancel) //nolint:contextcheck // reqCtx is the request's own context, which the dial's context carries as a value (dialForKey)
		defer stop()
	}
	if !c.breaker.tryConn() {
		c.breaker.st.cxOverflow.Add(1)
		c.breaker.st.pendingOverflow.Add(1)
		return nil, ErrOverflow
	}
	conn, err := c.Dial(ctx, ep)
	if err == nil && reqCtx != nil && reqCtx.Err() != nil {
		conn.Close()
		err = reqCtx.Err()
	}
	if err != nil {
		c.breaker.releaseConn()
		return nil, &dialError{err}
	}
	return &slotConn{Conn: conn, b: c.breaker}, nil
}

// slotConn gives its max_connections slot back on its first Close.
type slotConn struct {
	net.Conn
	b    *breaker
	once sync.Once
}

// NetConn returns the dialed connection (tlsconf.Layers: its TLS
// identities).
func (s *slotConn) NetConn() net.Conn { return s.Conn }

func (s *slotConn) Close() error {
	err := s.Conn.Close()
	s.once.Do(s.b.releaseConn)
	return err
}
