package listener

import (
	"context"
	"fmt"
	"net"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// tlsHandshakeTimeout bounds a downstream TLS handshake (Envoy's
// transport_socket_connect_timeout, which Istio leaves unset, is refused;
// this bound only keeps a silent client from holding a goroutine).
const tlsHandshakeTimeout = 10 * time.Second

// buildChainTLS builds a filter chain's transport socket.
func buildChainTLS(fc *listenerv3.FilterChain, c *filterChain, d Deps) error {
	if fc.GetTransportSocketConnectTimeout() != nil {
		return fmt.Errorf("filter chain %q: transport_socket_connect_timeout is not supported (remove it)", fc.GetName())
	}
	s, err := tlsconf.NewServer(fc.GetTransportSocket(), d.Secrets)
	if err != nil {
		return fmt.Errorf("filter chain %q: %w", fc.GetName(), err)
	}
	c.tls = s
	return nil
}

// terminateTLS runs the chain's TLS handshake on c and counts it under
// Envoy's listener.<address>.ssl.* names; false when it failed (c is
// closed).
func (m *Manager) terminateTLS(l *Listener, fc *filterChain, c net.Conn) (net.Conn, bool) {
	ctx, cancel := context.WithTimeout(m.ctx, tlsHandshakeTimeout)
	defer cancel()
	tc, err := fc.tls.Handshake(ctx, c)
	if err != nil {
		l.stats.SSL.ConnectionError.Add(1)
		m.log.Debug("tls handshake failed", "listener", l.Name, "peer", c.RemoteAddr().String(), "error", err)
		return nil, false
	}
	l.stats.SSL.Handshake.Add(1)
	return tc, true
}
