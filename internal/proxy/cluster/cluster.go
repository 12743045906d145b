// Package cluster is the proxy's cluster manager: clusters from the
// bootstrap and from CDS, their endpoints (static load_assignment or EDS),
// load balancing, and upstream connections.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/straitmesh/strait/internal/proxy/bootstrap"
	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// defaultConnectTimeout is Envoy's default cluster connect_timeout.
const defaultConnectTimeout = 5 * time.Second

// Kind is how a cluster finds its endpoints.
type Kind int

const (
	KindStatic Kind = iota
	KindEDS
	KindOriginalDst
)

// Endpoint is one upstream address.
type Endpoint struct {
	Network string // "tcp" or "unix"
	Address string // "ip:port" or a socket path
	// Source, when valid, is the downstream client's address that the
	// connection must leave from (listener filter original_src). It
	// overrides upstream_bind_config; connections with a source are never
	// shared with another source.
	Source OriginalSource
	// transportMatch is the endpoint's envoy.transport_socket_match
	// metadata, canonical (transport.go); "" when it has none.
	transportMatch string
}

// OriginalSource is what Envoy's original_src listener filter puts on the
// upstream connections of a downstream connection: its peer's IP (bound
// with port 0, IP_TRANSPARENT) and a socket mark (SO_MARK, when not 0).
// The zero value means no original source.
type OriginalSource struct {
	Addr netip.Addr
	Mark uint32
}

// IsValid reports whether s carries a source address.
func (s OriginalSource) IsValid() bool { return s.Addr.IsValid() }

// ErrNoHealthyUpstream is returned by Pick when a cluster has no endpoints.
var ErrNoHealthyUpstream = errors.New("no healthy upstream")

// Cluster is one built cluster. Fields set at creation are read-only; the
// endpoint list is swapped atomically by EDS updates. A Cluster stays usable
// after it is replaced or removed, so requests in flight finish on it.
type Cluster struct {
	// Set at creation, read-only.
	Name           string
	Config         *clusterv3.Cluster
	Kind           Kind
	EDSName        string // EDS service name (KindEDS)
	Stats          *stats.ClusterStats
	connectTimeout time.Duration
	dialer         *net.Dialer

	endpoints atomic.Pointer[[]Endpoint]
	rr        atomic.Uint64
	pool      *httpPool // net/http codec
	h1        h1Pool    // strait HTTP/1.1 codec
	proto     UpstreamProtocol
	h2        *h2Pool // nil when proto is UpstreamHTTP1
	// tls is the upstream TLS socket (transport.go); nil: plaintext.
	tls           *tlsconf.Client
	socketMatches []socketMatch // transport_socket_matches, in order
}

func build(c *clusterv3.Cluster, st *stats.Store) (*Cluster, error) {
	out := &Cluster{
		Name:           c.GetName(),
		Config:         c,
		Stats:          st.Cluster(c.GetName()),
		connectTimeout: defaultConnectTimeout,
	}
	if ct := c.GetConnectTimeout(); ct != nil {
		out.connectTimeout = ct.AsDuration()
	}
	out.dialer = &net.Dialer{Timeout: out.connectTimeout, KeepAlive: 30 * time.Second}
	if err := out.h1.configure(c); err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.GetName(), err)
	}
	if sa := c.GetUpstreamBindConfig().GetSourceAddress(); sa != nil {
		ip := net.ParseIP(sa.GetAddress())
		if ip == nil {
			return nil, fmt.Errorf("cluster %q: upstream_bind_config.source_address %q is not an IP", c.GetName(), sa.GetAddress())
		}
		out.dialer.LocalAddr = &net.TCPAddr{IP: ip, Port: int(sa.GetPortValue())}
	}
	if c.GetClusterType() != nil {
		return nil, fmt.Errorf("cluster %q: custom cluster_type %q is not supported", c.GetName(), c.GetClusterType().GetName())
	}
	switch c.GetType() {
	case clusterv3.Cluster_STATIC:
		out.Kind = KindStatic
		eps, err := endpointsFrom(c.GetLoadAssignment())
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", c.GetName(), err)
		}
		out.endpoints.Store(&eps)
	case clusterv3.Cluster_EDS:
		out.Kind = KindEDS
		out.EDSName = c.GetEdsClusterConfig().GetServiceName()
		if out.EDSName == "" {
			out.EDSName = c.GetName()
		}
		if cs := c.GetEdsClusterConfig().GetEdsConfig(); cs != nil && cs.GetAds() == nil {
			return nil, fmt.Errorf("cluster %q: eds_cluster_config.eds_config must be {ads: {}}", c.GetName())
		}
	case clusterv3.Cluster_ORIGINAL_DST:
		out.Kind = KindOriginalDst
		if c.GetLbPolicy() != clusterv3.Cluster_CLUSTER_PROVIDED {
			return nil, fmt.Errorf("cluster %q: ORIGINAL_DST requires lb_policy CLUSTER_PROVIDED, got %s", c.GetName(), c.GetLbPolicy())
		}
	default:
		return nil, fmt.Errorf("cluster %q: type %s is not supported (want STATIC, EDS or ORIGINAL_DST)", c.GetName(), c.GetType())
	}
	if out.Kind != KindOriginalDst && c.GetLbPolicy() == clusterv3.Cluster_CLUSTER_PROVIDED {
		return nil, fmt.Errorf("cluster %q: lb_policy CLUSTER_PROVIDED is only valid for ORIGINAL_DST", c.GetName())
	}
	out.pool = newHTTPPool(out)
	if err := out.buildHTTP2(c); err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.GetName(), err)
	}
	return out, nil
}

func endpointsFrom(cla *endpointv3.ClusterLoadAssignment) ([]Endpoint, error) {
	var eps []Endpoint
	for _, lle := range cla.GetEndpoints() {
		for _, lbe := range lle.GetLbEndpoints() {
			switch lbe.GetHealthStatus() {
			case corev3.HealthStatus_UNHEALTHY, corev3.HealthStatus_DRAINING, corev3.HealthStatus_TIMEOUT:
				continue
			}
			if lbe.GetEndpoint() == nil {
				return nil, errors.New("lb_endpoint without endpoint (named endpoints are not supported)")
			}
			n, a, err := bootstrap.EndpointAddress(lbe.GetEndpoint().GetAddress())
			if err != nil {
				return nil, err
			}
			eps = append(eps, Endpoint{Network: n, Address: a, transportMatch: transportMatchOf(lbe)}) // transport.go
		}
	}
	return eps, nil
}

// Endpoints returns the current endpoint list (read-only).
func (c *Cluster) Endpoints() []Endpoint {
	if p := c.endpoints.Load(); p != nil {
		return *p
	}
	return nil
}

func (c *Cluster) setEndpoints(eps []Endpoint) { c.endpoints.Store(&eps) }

// Pick chooses the upstream endpoint for one request or connection.
// originalDst is the downstream connection's original destination, used by
// ORIGINAL_DST clusters.
func (c *Cluster) Pick(originalDst netip.AddrPort) (Endpoint, error) {
	if c.Kind == KindOriginalDst {
		if !originalDst.IsValid() {
			return Endpoint{}, ErrNoHealthyUpstream
		}
		return Endpoint{Network: "tcp", Address: originalDst.String()}, nil
	}
	p := c.endpoints.Load()
	if p == nil || len(*p) == 0 {
		c.Stats.NoHealthy.Add(1)
		return Endpoint{}, ErrNoHealthyUpstream
	}
	eps := *p
	n := c.rr.Add(1) - 1
	return eps[n%uint64(len(eps))], nil
}

// Dial opens an upstream connection to ep, honouring connect_timeout and
// upstream_bind_config, and counts it.
func (c *Cluster) Dial(ctx context.Context, ep Endpoint) (net.Conn, error) {
	c.Stats.CxTotal.Add(1)
	if ep.Source.IsValid() && ep.Network == "tcp" {
		return c.dialFrom(ctx, ep)
	}
	d := c.dialer
	if ep.Network == "unix" && d.LocalAddr != nil {
		d = &net.Dialer{Timeout: c.connectTimeout}
	}
	conn, err := d.DialContext(ctx, ep.Network, ep.Address)
	if err != nil {
		c.Stats.CxConnectFail.Add(1)
		return nil, fmt.Errorf("cluster %s: connect %s: %w", c.Name, ep.Address, err)
	}
	return c.secure(ctx, ep, conn)
}

// dialFrom dials ep from its original source address (original_src).
func (c *Cluster) dialFrom(ctx context.Context, ep Endpoint) (net.Conn, error) {
	dst, err := netip.ParseAddrPort(ep.Address)
	if err != nil {
		c.Stats.CxConnectFail.Add(1)
		return nil, fmt.Errorf("cluster %s: original source: endpoint %q is not ip:port", c.Name, ep.Address)
	}
	if c.connectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.connectTimeout)
		defer cancel()
	}
	src := netip.AddrPortFrom(ep.Source.Addr, 0)
	conn, err := dialFrom(ctx, src, dst, ep.Source.Mark)
	if err != nil {
		c.Stats.CxConnectFail.Add(1)
		return nil, fmt.Errorf("cluster %s: connect %s: %w", c.Name, ep.Address, err)
	}
	return c.secure(ctx, ep, conn)
}

// close releases idle pooled connections; in-flight ones finish normally.
func (c *Cluster) close() {
	c.pool.closeIdle()
	c.h1.closeIdle(false)
	if c.h2 != nil {
		c.h2.closeIdle()
	}
}
