package cluster

import (
	"context"
	"fmt"
	"net"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// SetSecrets gives the manager the SDS provider that clusters with a TLS
// transport socket take their secrets from. Call it before any cluster is
// added; without it, a cluster whose TLS context names an SDS secret is
// refused.
func (m *Manager) SetSecrets(p *tlsconf.Provider) { m.secrets = p }

// build builds c with its transport socket.
func (m *Manager) build(c *clusterv3.Cluster) (*Cluster, error) {
	out, err := build(c, m.stats)
	if err != nil {
		return nil, err
	}
	if len(c.GetTransportSocketMatches()) > 0 {
		return nil, fmt.Errorf("cluster %q: transport_socket_matches is not supported (set transport_socket)", c.GetName())
	}
	cl, err := tlsconf.NewClient(c.GetTransportSocket(), m.secrets)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.GetName(), err)
	}
	out.tls = cl
	return out, nil
}

// secure runs the cluster's TLS handshake on a new upstream connection
// (none for a plaintext cluster), bounded by the connect timeout, and
// counts it (cluster.<name>.ssl.*).
func (c *Cluster) secure(ctx context.Context, conn net.Conn) (net.Conn, error) {
	if c.tls == nil {
		return conn, nil
	}
	if c.connectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.connectTimeout)
		defer cancel()
	}
	tc, err := c.tls.Handshake(ctx, conn)
	if err != nil {
		c.Stats.SSL.ConnectionError.Add(1)
		c.Stats.CxConnectFail.Add(1)
		return nil, fmt.Errorf("cluster %s: tls handshake with %s: %w", c.Name, conn.RemoteAddr(), err)
	}
	c.Stats.SSL.Handshake.Add(1)
	return tc, nil
}
