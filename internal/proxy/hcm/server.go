package hcm

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/straitmesh/strait/internal/proxy/cluster"
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
	srv      *http.Server
	ln       *chanListener
	done     chan struct{}
}

// Options configure a Server.
type Options struct {
	Log      *slog.Logger
	Clusters Clusters
}

type connKey struct{}

// conn is a downstream connection with what the HCM needs to know about it.
type conn struct {
	net.Conn
	filter *Filter
	dst    netip.AddrPort // original (or local) destination
}

// NewServer starts a Server.
func NewServer(o Options) *Server {
	s := &Server{
		log:      o.Log.With("component", "hcm"),
		clusters: o.Clusters,
		ln:       newChanListener(),
		done:     make(chan struct{}),
	}
	s.srv = &http.Server{
		Handler:        http.HandlerFunc(s.serveHTTP),
		IdleTimeout:    time.Hour,
		MaxHeaderBytes: 60 << 10,
		TLSNextProto:   map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c.(*conn))
		},
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(s.ln)
	}()
	return s
}

// ServeConn serves HTTP on c with filter f. dst is the connection's
// destination (its original destination when redirected). It returns once
// the connection is handed over.
func (s *Server) ServeConn(c net.Conn, f *Filter, dst netip.AddrPort) {
	if !s.ln.push(&conn{Conn: c, filter: f, dst: dst}) {
		c.Close()
	}
}

// Close stops the server and closes every connection it serves.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	return err
}

// chanListener is a net.Listener fed by ServeConn.
type chanListener struct {
	ch        chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *chanListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.closed:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return &net.TCPAddr{} }

var errNoConn = errors.New("request without connection info")
