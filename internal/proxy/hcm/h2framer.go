package hcm

import (
	"context"
	"net"
	"net/http"
	"time"

	h2codec "github.com/straitmesh/strait/internal/proxy/http2"
	h2server "github.com/straitmesh/strait/internal/proxy/http2/server"
	"github.com/straitmesh/strait/internal/proxy/wbatch"
)

// serveH2Framer serves HTTP/2 on nc with the proxy's own server
// connection (package http2/server, on x/net/http2's Framer), the
// default; STRAIT_H2_SERVER=xnet keeps x/net/http2's Server (serveH2).
// The streams go through the same handler chain as x/net's: the head
// limits, the stream timeouts, max_requests_per_connection, the grown
// stack, then serveStream.
func (s *Server) serveH2Framer(ctx context.Context, nc net.Conn, f *Filter, lim *Limits, d *Drain) {
	// Under the batched writes, the guard against rapid reset, empty
	// frame floods and header blocks left open sees every frame (package
	// http2), as on x/net's path.
	bc := wbatch.New(h2codec.NewGuard(nc, lim.RequestHeadersTimeout))
	defer bc.Close()
	var c *h2server.Conn
	goAway := func() { c.Shutdown() }
	handler := limitStreamHead(lim, guardStream(lim, s.serveStream)) // h2limits.go
	if lim.MaxRequestsPerConnection > 0 {
		// As on x/net's path (serveH2): the stream that reaches
		// max_requests_per_connection is served, the connection gets
		// GOAWAY.
		var cl connLimits
		cl.init(lim)
		inner := handler
		handler = func(w http.ResponseWriter, r *http.Request) {
			if cl.beginRequest() {
				goAway()
			}
			inner(w, r)
		}
	}
	handler = withGrownStack(handler) // h2stack.go
	// Request.TLS != nil means :scheme https and nothing else, as on
	// x/net's path (scheme.go).
	tlsState := schemeProbe{}.ConnectionState()
	var headerList uint32
	if n := h2HeaderListSize(lim); n > 0 { // h2limits.go
		headerList = uint32(n + 320) // x/net's padding: 32 bytes for each of 10 fields
	}
	c = h2server.New(bc, h2server.Config{
		Handler:              handler,
		TLS:                  &tlsState,
		MaxConcurrentStreams: f.h2.MaxConcurrentStreams,
		StreamWindow:         uint32(f.h2.MaxUploadBufferPerStream),
		ConnWindow:           uint32(f.h2.MaxUploadBufferPerConnection),
		MaxHeaderListSize:    headerList,
		IdleTimeout:          lim.IdleTimeout,
		PingInterval:         f.h2.ReadIdleTimeout,
		PingTimeout:          f.h2.PingTimeout,
		Log:                  s.log,
	})
	stop := d.onStart(goAway)
	defer stop()
	stopEnd := d.onEnd(func() { nc.Close() })
	defer stopEnd()
	if lim.MaxConnectionDuration > 0 {
		t := time.AfterFunc(lim.MaxConnectionDuration, goAway)
		defer t.Stop()
	}
	c.Serve(ctx)
}
