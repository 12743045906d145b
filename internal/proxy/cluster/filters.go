package cluster

// The cluster's upstream network filters (Cluster.filters). The one
// strait runs is Istio's istio.metadata_exchange (TCPClusterMx): on an
// upstream connection whose TLS ALPN came out as istio-peer-exchange, our
// exchange frame goes first and the server's is taken off the front of
// what it sends (package peermeta). Any other filter is refused.

import (
	"fmt"
	"net"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/straitmesh/strait/internal/proxy/peermeta"
)

// SetExchangeFrame gives the manager this proxy's exchange frame (its
// node's id and workload) for the clusters that list
// istio.metadata_exchange. Call it before any cluster is added; without
// it, such a cluster tells peers an unknown workload.
func (m *Manager) SetExchangeFrame(frame []byte) { m.exchangeFrame = frame }

// parseUpstreamFilters reads Cluster.filters: whether the cluster runs
// the metadata exchange.
func parseUpstreamFilters(c *clusterv3.Cluster) (exchange bool, err error) {
	for i, f := range c.GetFilters() {
		if f.GetName() != peermeta.FilterName {
			return false, fmt.Errorf("filters[%d] %q: upstream network filter not supported (only %s)", i, f.GetName(), peermeta.FilterName)
		}
		if f.GetConfigDiscovery() != nil {
			return false, fmt.Errorf("filters[%d] %q: config_discovery is not supported (give typed_config)", i, f.GetName())
		}
		if err := peermeta.ParseNetworkConfig(f.GetTypedConfig()); err != nil {
			return false, fmt.Errorf("filters[%d]: %w", i, err)
		}
		exchange = true
	}
	return exchange, nil
}

// PeerExchange reports whether the cluster runs Istio's metadata
// exchange on its connections that negotiate it.
func (c *Cluster) PeerExchange() bool { return c.exchangeFrame != nil }

// startExchange wraps a new upstream connection in the exchange when the
// cluster runs it and the connection negotiated it, sending our frame at
// once as Istio's upstream filter does.
func (c *Cluster) startExchange(conn net.Conn) (net.Conn, error) {
	if c.exchangeFrame == nil || peermeta.NegotiatedALPN(conn) != peermeta.ALPN {
		return conn, nil
	}
	x := peermeta.NewConn(conn, c.exchangeFrame)
	if err := x.Send(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	return x, nil
}
