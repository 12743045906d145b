// Package cluster is the proxy's cluster manager: clusters from the
// bootstrap and from CDS, their endpoints (static load_assignment or EDS),
// load balancing, and upstream connections.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/straitmesh/strait/internal/proxy/bootstrap"
	"github.com/straitmesh/strait/internal/proxy/cluster/lb"
	"github.com/straitmesh/strait/internal/proxy/cluster/proxyheader"
	"github.com/straitmesh/strait/internal/proxy/istiometrics"
	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
	"github.com/straitmesh/strait/internal/proxy/xdsclient"
	"github.com/straitmesh/strait/internal/transparent"
)

// defaultConnectTimeout is Envoy's default cluster connect_timeout.
const defaultConnectTimeout = 5 * time.Second

// Kind is how a cluster finds its endpoints.
type Kind int

// The cluster types strait-proxy serves (Envoy's Cluster.type).
const (
	KindStatic Kind = iota
	KindEDS
	KindOriginalDst
	// KindStrictDNS and KindLogicalDNS resolve their load_assignment's
	// names (dnsDiscovery).
	KindStrictDNS
	KindLogicalDNS
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
	// Downstream, when valid, is the downstream connection a request or
	// TCP connection came on; a cluster with an upstream PROXY protocol
	// transport socket announces it on its upstream connections, which
	// are then never shared with another downstream connection
	// (proxyheader.Unwrap).
	Downstream Downstream

	// h is the host the load balancer picked (nil for ORIGINAL_DST and
	// endpoints made by hand); outlier reports and Finish go to it.
	h *host
	// counted is set by PickRequest: Finish releases the request.
	counted bool
	// priority is the priority level h was picked from (0 for clusters
	// with one level).
	priority uint32
	// transportMatch is the endpoint's envoy.transport_socket_match
	// metadata, canonical (transportMatchOf); "" when it has none.
	transportMatch string
	// localityMatch is the same metadata of the endpoint's locality
	// (LocalityLbEndpoints.metadata), read when no match takes the
	// endpoint's own.
	localityMatch string
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

// Downstream is the address pair of a downstream connection: its peer
// (Src) and the address it was sent to (Dst, the original destination).
type Downstream struct {
	Src, Dst netip.AddrPort
}

// IsValid reports whether d carries both addresses.
func (d Downstream) IsValid() bool { return d.Src.IsValid() && d.Dst.IsValid() }

// connOwner is what an upstream connection belongs to beyond its
// endpoint: an original source, a downstream announced by PROXY protocol,
// or neither (then it is shared by every request). Pools key on it.
type connOwner struct {
	Source     OriginalSource
	Downstream Downstream
}

func (o connOwner) isValid() bool { return o.Source.IsValid() || o.Downstream.IsValid() }

// owner is ep's connOwner; Downstream only matters (and only splits the
// pool) for a cluster that writes PROXY headers, so callers set it only
// then (Cluster.ProxyProtocol).
func (e Endpoint) owner() connOwner { return connOwner{e.Source, e.Downstream} }

// ErrNoHealthyUpstream is returned by Pick when a cluster has no endpoints.
var ErrNoHealthyUpstream = errors.New("no healthy upstream")

// Cluster is one built cluster. Fields set at creation are read-only; the
// endpoint list is swapped atomically by EDS updates. A Cluster stays usable
// after it is replaced or removed, so requests in flight finish on it.
type Cluster struct {
	// Set at creation, read-only.
	Name string
	// config is the Cluster as configured, in its deterministic wire
	// form (configWire), set by Manager.build: the manager compares it to
	// tell a changed cluster from the same one sent again and decodes it
	// for the config dump.
	config  []byte
	Kind    Kind
	EDSName string // EDS service name (KindEDS)
	// edsFetchTimeout is eds_config's initial_fetch_timeout (KindEDS): how
	// long the cluster warms waiting for its endpoints (startFetchTimerLocked); 0
	// waits for ever.
	edsFetchTimeout time.Duration
	Stats           *stats.ClusterStats
	connectTimeout  time.Duration
	dialer          *net.Dialer
	log             *slog.Logger
	lb              lb.Config
	breaker         *breaker
	cxTimeout       *atomic.Uint64 // upstream_cx_connect_timeout
	outlier         *outlierConfig // nil: no outlier detection
	odStats         outlierStats
	panicThreshold  float64        // healthy_panic_threshold, percent
	hc              *healthChecker // nil: no active health checking

	hosts    atomic.Pointer[hostSet] // nil until the first endpoints
	h1       h1Pool                  // HTTP/1.1 connections (forward/h1, RoundTrip)
	proto    UpstreamProtocol
	h2       *h2Pool       // nil when proto is UpstreamHTTP1
	dns      *dnsDiscovery // KindStrictDNS and KindLogicalDNS only
	dnsReady atomic.Bool   // the first resolution is done
	// tls is the upstream TLS socket (socketFor); nil: plaintext.
	tls           *tlsconf.Client
	proxyProto    proxyheader.Version // upstream_proxy_protocol around every transport socket (writeProxyHeader)
	socketMatches []socketMatch       // transport_socket_matches, in order
	// exchangeFrame is our metadata exchange frame when the cluster lists
	// istio.metadata_exchange (filters.go); nil: no exchange.
	exchangeFrame []byte
	// IstioService is the destination service of the cluster's
	// istio.services metadata (istiometa.go); HasIstioService is false
	// when it names none.
	IstioService    istiometrics.Service
	HasIstioService bool
}

func build(c *clusterv3.Cluster, st *stats.Store, log *slog.Logger) (*Cluster, error) {
	out := &Cluster{
		Name:           c.GetName(),
		Stats:          st.Cluster(statName(c)),
		connectTimeout: defaultConnectTimeout,
		log:            log,
	}
	if out.log == nil {
		out.log = slog.New(slog.DiscardHandler)
	}
	out.IstioService, out.HasIstioService = istioService(c.GetMetadata()) // istiometa.go
	if err := checkClusterFields(c); err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.GetName(), err)
	}
	if ct := c.GetConnectTimeout(); ct != nil {
		out.connectTimeout = ct.AsDuration()
	}
	out.dialer = &net.Dialer{Timeout: out.connectTimeout, KeepAlive: 30 * time.Second}
	out.cxTimeout = out.Stats.Counter("upstream_cx_connect_timeout")
	if err := out.configureTraffic(c); err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.GetName(), err)
	}
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
	switch c.GetType() {
	case clusterv3.Cluster_STATIC:
		out.Kind = KindStatic
		eps, err := endpointsFrom(c.GetLoadAssignment())
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", c.GetName(), err)
		}
		out.setEndpointList(eps)
	case clusterv3.Cluster_EDS:
		out.Kind = KindEDS
		out.EDSName = c.GetEdsClusterConfig().GetServiceName()
		if out.EDSName == "" {
			out.EDSName = c.GetName()
		}
		if cs := c.GetEdsClusterConfig().GetEdsConfig(); cs != nil && cs.GetAds() == nil {
			return nil, fmt.Errorf("cluster %q: eds_cluster_config.eds_config must be {ads: {}}", c.GetName())
		}
		if err := checkEDSConfig(c.GetEdsClusterConfig()); err != nil {
			return nil, fmt.Errorf("cluster %q: %w", c.GetName(), err)
		}
		t, err := xdsclient.InitialFetchTimeout(c.GetEdsClusterConfig().GetEdsConfig())
		if err != nil {
			return nil, fmt.Errorf("cluster %q: eds_cluster_config.eds_config: %w", c.GetName(), err)
		}
		out.edsFetchTimeout = t
	case clusterv3.Cluster_ORIGINAL_DST:
		out.Kind = KindOriginalDst
		if c.GetLbPolicy() != clusterv3.Cluster_CLUSTER_PROVIDED {
			return nil, fmt.Errorf("cluster %q: ORIGINAL_DST requires lb_policy CLUSTER_PROVIDED, got %s", c.GetName(), c.GetLbPolicy())
		}
		if err := checkOriginalDst(c); err != nil {
			return nil, fmt.Errorf("cluster %q: %w", c.GetName(), err)
		}
	case clusterv3.Cluster_STRICT_DNS, clusterv3.Cluster_LOGICAL_DNS:
		out.Kind = KindStrictDNS
		if c.GetType() == clusterv3.Cluster_LOGICAL_DNS {
			out.Kind = KindLogicalDNS
		}
		d, err := newDNSDiscovery(c, st)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", c.GetName(), err)
		}
		out.dns = d
	default:
		return nil, fmt.Errorf("cluster %q: type %s is not supported (want STATIC, EDS, ORIGINAL_DST, STRICT_DNS or LOGICAL_DNS)", c.GetName(), c.GetType())
	}
	if out.Kind != KindOriginalDst && c.GetLbPolicy() == clusterv3.Cluster_CLUSTER_PROVIDED {
		return nil, fmt.Errorf("cluster %q: lb_policy CLUSTER_PROVIDED is only valid for ORIGINAL_DST", c.GetName())
	}
	if err := out.buildHTTP2(c); err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.GetName(), err)
	}
	return out, nil
}

// endpointList is a cluster's endpoints with their load balancing weights
// and, when the load assignment has more than one priority or locality,
// where each endpoint sits (buildLevels).
type endpointList struct {
	eps     []Endpoint
	weights []uint32 // load_balancing_weight per endpoint; nil: all 1
	// group is the index in groups of each endpoint's LocalityLbEndpoints;
	// nil when there is one group of priority 0.
	group  []int
	groups []localityGroupInfo
	// overprovisioning is policy.overprovisioning_factor, in percent.
	overprovisioning uint32
}

// localityGroupInfo is what a LocalityLbEndpoints says of its endpoints.
type localityGroupInfo struct {
	priority uint32
	weight   uint32 // load_balancing_weight; 0: unset
}

func endpointsFrom(cla *endpointv3.ClusterLoadAssignment) (endpointList, error) {
	out := endpointList{overprovisioning: defaultOverprovisioning}
	if err := checkAssignment(cla); err != nil {
		return out, err
	}
	if f := cla.GetPolicy().GetOverprovisioningFactor(); f != nil {
		if f.GetValue() == 0 {
			return out, errors.New("cluster_load_assignment.policy.overprovisioning_factor 0 would make every host unavailable (Envoy's default is 140)")
		}
		out.overprovisioning = f.GetValue()
	}
	n := 0
	for _, lle := range cla.GetEndpoints() {
		n += len(lle.GetLbEndpoints())
	}
	out.eps = make([]Endpoint, 0, n)
	out.weights = make([]uint32, 0, n)
	out.group = make([]int, 0, n)
	weighted, grouped := false, false
	for gi, lle := range cla.GetEndpoints() {
		out.groups = append(out.groups, localityGroupInfo{priority: lle.GetPriority(), weight: lle.GetLoadBalancingWeight().GetValue()})
		grouped = grouped || gi > 0 || lle.GetPriority() != 0
		for _, lbe := range lle.GetLbEndpoints() {
			switch lbe.GetHealthStatus() {
			case corev3.HealthStatus_UNHEALTHY, corev3.HealthStatus_DRAINING, corev3.HealthStatus_TIMEOUT:
				continue
			}
			if lbe.GetEndpoint() == nil {
				return out, errors.New("lb_endpoint without endpoint (named endpoints are not supported)")
			}
			n, a, err := bootstrap.EndpointAddress(lbe.GetEndpoint().GetAddress())
			if err != nil {
				return out, err
			}
			w := lbe.GetLoadBalancingWeight().GetValue()
			if w == 0 {
				w = 1
			}
			weighted = weighted || w != 1
			out.eps = append(out.eps, Endpoint{Network: n, Address: a, transportMatch: transportMatchOf(lbe.GetMetadata()), localityMatch: transportMatchOf(lle.GetMetadata())})
			out.weights = append(out.weights, w)
			out.group = append(out.group, gi)
		}
	}
	if !weighted {
		out.weights = nil
	}
	if !grouped {
		out.group, out.groups = nil, nil
	}
	return out, nil
}

// Priority is the priority level the endpoint was picked from.
func (e Endpoint) Priority() uint32 { return e.priority }

// Endpoints returns a copy of the current endpoint list.
func (c *Cluster) Endpoints() []Endpoint {
	s := c.hosts.Load()
	if s == nil {
		return nil
	}
	out := make([]Endpoint, len(s.hosts))
	for i, h := range s.hosts {
		out[i] = h.ep.endpoint()
	}
	return out
}

// hasEndpoints reports whether the cluster got its first endpoint list.
func (c *Cluster) hasEndpoints() bool { return c.hosts.Load() != nil }

// setEndpoints replaces the endpoints with eps, all of weight 1.
func (c *Cluster) setEndpoints(eps []Endpoint) { c.setEndpointList(endpointList{eps: eps}) }

// setEndpointList replaces the endpoints; hosts whose address stays keep
// their state.
func (c *Cluster) setEndpointList(l endpointList) {
	s := newHostSet(l, c.hosts.Load(), c.lb)
	c.hosts.Store(s)
	if c.hc != nil {
		c.hc.update(s)
	}
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
		c.connectFailed(ctx, err)
		return nil, fmt.Errorf("cluster %s: connect %s: %w", c.Name, ep.Address, err)
	}
	if err := c.writeProxyHeader(conn, ep.Downstream); err != nil {
		conn.Close()
		c.Stats.CxConnectFail.Add(1)
		return nil, err
	}
	sc, err := c.secure(ctx, ep, conn)
	if err != nil {
		return nil, err
	}
	return c.startExchange(sc) // filters.go
}

// connectFailed counts a connection that failed to open: always
// upstream_cx_connect_fail, and upstream_cx_connect_timeout too when the
// cluster's connect_timeout ran out, as Envoy counts both. parent is the
// caller's context: a timeout after it ended (the request gave up) is not
// the connect timeout's.
func (c *Cluster) connectFailed(parent context.Context, err error) {
	c.Stats.CxConnectFail.Add(1)
	var ne net.Error
	if parent.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()) {
		c.cxTimeout.Add(1)
	}
}

// dialFrom dials ep from its original source address (original_src).
func (c *Cluster) dialFrom(ctx context.Context, ep Endpoint) (net.Conn, error) {
	dst, err := netip.ParseAddrPort(ep.Address)
	if err != nil {
		c.Stats.CxConnectFail.Add(1)
		return nil, fmt.Errorf("cluster %s: original source: endpoint %q is not ip:port", c.Name, ep.Address)
	}
	parent := ctx
	if c.connectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.connectTimeout)
		defer cancel()
	}
	src := netip.AddrPortFrom(ep.Source.Addr, 0)
	conn, err := transparent.DialFrom(ctx, src, dst, transparent.DialOptions{Mark: ep.Source.Mark})
	if err != nil {
		c.connectFailed(parent, err)
		return nil, fmt.Errorf("cluster %s: connect %s: %w", c.Name, ep.Address, err)
	}
	if err := c.writeProxyHeader(conn, ep.Downstream); err != nil {
		conn.Close()
		c.Stats.CxConnectFail.Add(1)
		return nil, err
	}
	return c.secure(ctx, ep, conn)
}

// stopDiscovery ends the cluster's DNS resolution, if it has one, without
// waiting for it.
func (c *Cluster) stopDiscovery() {
	if c.dns != nil {
		c.dns.cancel()
	}
}

// activate is called when the cluster starts serving (it is published as
// active): its health checks start.
func (c *Cluster) activate() {
	if c.hc != nil {
		c.hc.activate()
	}
	// Envoy's membership gauges, read from the host set when the stats
	// are rendered: the active cluster owns them.
	c.Stats.SetGaugeFunc("membership_total", func() int64 {
		if s := c.hosts.Load(); s != nil {
			return int64(len(s.hosts))
		}
		return 0
	})
	c.Stats.SetGaugeFunc("membership_healthy", func() int64 {
		n := 0
		if s := c.hosts.Load(); s != nil {
			for _, h := range s.hosts {
				if h.healthy() {
					n++
				}
			}
		}
		return int64(n)
	})
}

// close releases idle pooled connections; in-flight ones finish normally.
func (c *Cluster) close() {
	c.stopDiscovery()
	if c.hc != nil {
		c.hc.close()
	}
	c.h1.closeIdle(false)
	if c.h2 != nil {
		c.h2.closeIdle()
	}
}

// statName is the name the cluster's stats carry: alt_stat_name when set
// (Istio sets it to a shorter form), else the cluster's name, as in Envoy.
func statName(c *clusterv3.Cluster) string {
	if n := c.GetAltStatName(); n != "" {
		return n
	}
	return c.GetName()
}
