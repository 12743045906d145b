package listener

import (
	"context"
	"fmt"
	"net"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// defaultTLSHandshakeTimeout bounds a downstream TLS handshake when the
// chain sets no transport_socket_connect_timeout (Envoy then has none;
// this bound only keeps a silent client from holding a goroutine).
const defaultTLSHandshakeTimeout = 10 * time.Second

// buildChainTLS builds a filter chain's transport socket.
func buildChainTLS(fc *listenerv3.FilterChain, c *filterChain, d Deps) error {
	s, err := tlsconf.NewServer(fc.GetTransportSocket(), d.Secrets)
	if err != nil {
		return fmt.Errorf("filter chain %q: %w", fc.GetName(), err)
	}
	c.tls = s
	// transport_socket_connect_timeout bounds the transport socket's
	// handshake (Istio sets it on every chain); a plaintext chain has none.
	c.handshakeTimeout = defaultTLSHandshakeTimeout
	if d := fc.GetTransportSocketConnectTimeout(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
			return fmt.Errorf("filter chain %q: transport_socket_connect_timeout %v is not a valid duration", fc.GetName(), d)
		}
		if d.AsDuration() > 0 {
			c.handshakeTimeout = d.AsDuration()
		}
	}
	return nil
}

// terminateTLS runs the chain's TLS handshake on c and counts it under
// Envoy's listener.<address>.ssl.* names; false when it failed (c is
// closed).
func (m *Manager) terminateTLS(l *Listener, fc *filterChain, c net.Conn) (net.Conn, bool) {
	ctx, cancel := context.WithTimeout(m.ctx, fc.handshakeTimeout)
	defer cancel()
	tc, err := fc.tls.Handshake(ctx, rawTCP(c))
	if err != nil {
		l.stats.SSL.ConnectionError.Add(1)
		m.log.Debug("tls handshake failed", "listener", l.Name, "peer", c.RemoteAddr().String(), "error", err)
		return nil, false
	}
	l.stats.SSL.Handshake.Add(1)
	return tc, true
}

// rawTCP returns c with its TCP connection made by http1.WrapConn, looking
// through the TLS inspector's replaying wrapper: TLS reads and writes its
// records with raw non-blocking system calls, as the HTTP/1.1 codec does on
// a connection in clear text, instead of net.TCPConn's, whose scheduler
// bookkeeping (entersyscall/exitsyscall) costs more than the call on every
// record.
func rawTCP(c net.Conn) net.Conn {
	if p, ok := c.(*prefixedConn); ok {
		p.Conn = http1.WrapConn(p.Conn)
		return p
	}
	return http1.WrapConn(c)
}
