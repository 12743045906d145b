package hcm

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/fwdheaders"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/rbac"
)

// Clusters resolves cluster names (the cluster manager).
type Clusters interface {
	Get(name string) *cluster.Cluster
}

// Server serves HTTP/1.1 on connections handed to it by listeners. One
// Server serves every HCM of a proxy; each connection carries its own
// Filter, so a listener update only affects new connections.
type Server struct {
	// Set at creation, read-only.
	log      *slog.Logger
	clusters Clusters
	codec    Codec
	shadow   *forward.Shadowing // request mirrors
	parker   *http1.Parker      // idle HTTP/1.1 connections (h1.go)
	local    netip.Addr         // appended to x-forwarded-for for a loopback peer (fwdheaders.XFF)

	mu     sync.Mutex            // guards conns, parked, taken and closed
	conns  map[net.Conn]struct{} // every connection served, but those parked
	parked int                   // parked HTTP/1.1 connections (h1park.go), which have no net.Conn
	taken  uint64                // connections ever added to conns
	closed bool
}

// Codec names the HTTP/1.1 implementation on the request path. There is
// one: the net/http codec ("nethttp") was removed, so that every limit,
// timeout and drain is enforced by one request path (#21).
type Codec string

// CodecStrait is the purpose-built codec (package http1): pooled buffers,
// headers as a reused slice, bodies streamed without copies.
const CodecStrait Codec = "strait"

// ParseCodec validates a codec name ("" means the default).
func ParseCodec(s string) (Codec, error) {
	switch Codec(s) {
	case "", CodecStrait:
		return CodecStrait, nil
	case "nethttp":
		return "", fmt.Errorf("http codec %q was removed: every request is served by the %q codec (drop the flag or say %q)", s, CodecStrait, CodecStrait)
	}
	return "", fmt.Errorf("http codec %q is not supported (only %q)", s, CodecStrait)
}

// Options configure a Server.
type Options struct {
	Logger   *slog.Logger
	Clusters Clusters
	// Codec defaults to CodecStrait.
	Codec Codec
	// LocalAddress is the proxy's own address (Envoy's local_info
	// address), appended to x-forwarded-for in place of a loopback peer
	// by an HCM with use_remote_address. Zero: the first address of the
	// host's interfaces that is not a loopback one, as Envoy picks it.
	LocalAddress netip.Addr
}

type connKey struct{}

// conn is a downstream connection with what the HCM needs to know about it.
type conn struct {
	remote netip.AddrPort // the peer's (the net.Conn itself changes as the connection parks, h2.go)
	filter *Filter
	dst    netip.AddrPort // original (or local) destination
	src    cluster.OriginalSource
	secure bool                // the listener terminated TLS (scheme.go)
	xfcc   fwdheaders.XFCCConn // the connection's client certificate
	// authz and fconn describe the connection for the RBAC filters and
	// the others (chain.go); nil when the HCM has no filter. Read by
	// every stream.
	authz *rbac.Connection
	fconn *httpfilter.Connection
	// logConn describes it for the access log (accesslog.go); nil when
	// the HCM logs nothing. Read by every stream.
	logConn *accesslog.Conn
}

// NewServer starts a Server.
func NewServer(o Options) *Server {
	s := &Server{
		log:      o.Logger.With("component", "hcm"),
		clusters: o.Clusters,
		codec:    o.Codec,
		conns:    map[net.Conn]struct{}{},
		local:    o.LocalAddress,
	}
	if !s.local.IsValid() {
		s.local = fwdheaders.LocalAddress()
	}
	s.shadow = forward.NewShadowing(s.log, o.Clusters)
	s.parker = http1.NewParker(s.log)
	if s.codec == "" {
		s.codec = CodecStrait
	}
	return s
}

// ServeConn serves HTTP on c with filter f. dst is the connection's
// destination (its original destination when redirected). It returns once
// the connection is handed over. src, when valid, is the source address
// (and mark) of its upstream connections (listener filter original_src).
func (s *Server) ServeConn(c net.Conn, f *Filter, dst netip.AddrPort, src cluster.OriginalSource) {
	s.ServeConnDrain(c, f, dst, src, nil)
}

// ServeConnDrain is ServeConn for a connection that ends gracefully once d
// starts (see Drain).
func (s *Server) ServeConnDrain(c net.Conn, f *Filter, dst netip.AddrPort, src cluster.OriginalSource, d *Drain) {
	if f.h2 != nil { // HTTP/2, or HTTP/1.1 after a look at the first bytes (h2.go)
		if !s.track(c) {
			c.Close()
			return
		}
		go s.serveHTTP2Capable(c, f, dst, src, d)
		return
	}
	if !s.track(c) {
		c.Close()
		return
	}
	go s.serveH1(c, f, dst, src, d)
}

// Close stops the server and closes every connection it serves.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	s.parker.Close()
	for c := range conns {
		c.Close()
	}
	s.shadow.Close()
	return nil
}

// Active is the number of connections being served.
func (s *Server) Active() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns) + s.parked
}

// Connections is Active and how many connections the server has taken
// since it started, read together: a drain that polls sees from the total
// that a connection came and went between two polls.
func (s *Server) Connections() (active int, taken uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns) + s.parked, s.taken
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	s.taken++
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// parking counts a connection that is about to be parked (detached from
// its net.Conn c) as parked rather than as c.
func (s *Server) parking(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.parked++
	s.mu.Unlock()
}

// unparked counts a parked connection as parked no more: tracked as c
// (nil: it ended, or was not parked after all); it reports false, not
// tracking c, when the Server has closed.
func (s *Server) unparked(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.parked--
	if s.closed {
		return false
	}
	if c != nil {
		s.conns[c] = struct{}{}
	}
	return true
}

var errNoConn = errors.New("request without connection info")
