package cluster

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	caresv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/network/dns_resolver/cares/v3"
	getaddrinfov3 "github.com/envoyproxy/go-control-plane/envoy/extensions/network/dns_resolver/getaddrinfo/v3"

	"github.com/straitmesh/strait/internal/proxy/cluster/dnsresolver"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// Envoy's defaults for DNS clusters (cluster.proto and the c-ares
// resolver's).
const (
	defaultDNSRefreshRate  = 5 * time.Second
	defaultDNSQueryTimeout = 5 * time.Second
	defaultDNSQueryTries   = 4
	// caresName and getaddrinfoName are the typed_dns_resolver_config
	// extensions strait-proxy accepts.
	caresName       = "envoy.network.dns_resolver.cares"
	getaddrinfoName = "envoy.network.dns_resolver.getaddrinfo"
)

// dnsTarget is one lb_endpoint of a DNS cluster: a name, a port and the
// load balancing weight of the addresses it resolves to.
type dnsTarget struct {
	host   string
	port   uint32
	weight uint32
	// transportMatch and localityMatch are the lb_endpoint's and its
	// locality's transport socket match metadata (transportMatchOf), which
	// every address the name resolves to carries, as Envoy's resolved
	// hosts keep their lb_endpoint's metadata.
	transportMatch, localityMatch string
}

// dnsDiscovery keeps the endpoints of a STRICT_DNS or LOGICAL_DNS cluster
// by resolving its load_assignment's names again and again, as Envoy's
// StrictDnsClusterImpl and LogicalDnsCluster do:
//
//   - STRICT_DNS: every address of every name is an endpoint;
//   - LOGICAL_DNS: one name, and only the first address of each answer.
//
// After a successful resolution the next one is dns_refresh_rate later (the
// answer's smallest TTL instead with respect_dns_ttl, when it has one), plus
// up to dns_jitter; after a failure, dns_failure_refresh_rate (doubling
// from its base to its max) or else dns_refresh_rate, and the endpoints of
// the name that failed stay as they were. A name that does not exist, or
// has no address, has no endpoints.
//
// Fields are set by newDNSDiscovery and read-only after; run is the only
// goroutine that resolves.
type dnsDiscovery struct {
	logical      bool
	targets      []dnsTarget
	family       clusterv3.Cluster_DnsLookupFamily
	refresh      time.Duration
	failureBase  time.Duration
	failureMax   time.Duration
	respectTTL   bool
	jitter       time.Duration
	resolver     *dnsresolver.Resolver
	attempts     *atomic.Uint64 // cluster.NAME.update_attempt
	successes    *atomic.Uint64 // cluster.NAME.update_success
	failures     *atomic.Uint64 // cluster.NAME.update_failure
	emptyUpdates *atomic.Uint64 // cluster.NAME.update_empty

	mu        sync.Mutex // guards the fields below
	started   bool
	cancelRun context.CancelFunc
	done      chan struct{} // closed when run returns
}

// newDNSDiscovery reads the DNS fields of a STRICT_DNS or LOGICAL_DNS
// cluster; an error names the field it cannot honour.
func newDNSDiscovery(c *clusterv3.Cluster, st *stats.Store) (*dnsDiscovery, error) {
	d := &dnsDiscovery{
		logical:  c.GetType() == clusterv3.Cluster_LOGICAL_DNS,
		family:   c.GetDnsLookupFamily(),
		refresh:  defaultDNSRefreshRate,
		resolver: &dnsresolver.Resolver{Timeout: defaultDNSQueryTimeout, Tries: defaultDNSQueryTries},
	}
	if r := c.GetDnsRefreshRate(); r != nil { //nolint:staticcheck // Istio sends the cluster-level field
		d.refresh = r.AsDuration()
	}
	d.respectTTL = c.GetRespectDnsTtl()  //nolint:staticcheck // Istio sends the cluster-level field
	if j := c.GetDnsJitter(); j != nil { //nolint:staticcheck // Istio sends the cluster-level field
		d.jitter = j.AsDuration()
	}
	if f := c.GetDnsFailureRefreshRate(); f != nil { //nolint:staticcheck // the cluster-level field
		d.failureBase = f.GetBaseInterval().AsDuration()
		d.failureMax = 10 * d.failureBase
		if m := f.GetMaxInterval(); m != nil {
			d.failureMax = m.AsDuration()
		}
	}
	if err := d.configureResolver(c); err != nil {
		return nil, err
	}
	for _, lle := range c.GetLoadAssignment().GetEndpoints() {
		if lle.GetPriority() != 0 {
			return nil, fmt.Errorf("load_assignment.endpoints.priority %d is not supported for DNS clusters (only 0)", lle.GetPriority())
		}
		for _, lbe := range lle.GetLbEndpoints() {
			sa := lbe.GetEndpoint().GetAddress().GetSocketAddress()
			if sa == nil {
				return nil, fmt.Errorf("load_assignment: a %s endpoint must be a socket_address with a name and a port_value", c.GetType())
			}
			if sa.GetResolverName() != "" {
				return nil, fmt.Errorf("load_assignment: socket_address.resolver_name %q is not supported", sa.GetResolverName())
			}
			if sa.GetProtocol() != corev3.SocketAddress_TCP {
				return nil, fmt.Errorf("load_assignment: socket_address.protocol %s is not supported (only TCP)", sa.GetProtocol())
			}
			if sa.GetNamedPort() != "" || sa.GetPortValue() == 0 {
				return nil, fmt.Errorf("load_assignment: endpoint %q needs a port_value", sa.GetAddress())
			}
			d.targets = append(d.targets, dnsTarget{host: sa.GetAddress(), port: sa.GetPortValue(), weight: max(lbe.GetLoadBalancingWeight().GetValue(), 1),
				transportMatch: transportMatchOf(lbe.GetMetadata()), localityMatch: transportMatchOf(lle.GetMetadata())})
		}
	}
	if d.logical && len(d.targets) != 1 {
		return nil, fmt.Errorf("load_assignment: a LOGICAL_DNS cluster must have exactly one lb_endpoint, got %d", len(d.targets))
	}
	d.attempts = st.Counter("cluster." + c.GetName() + ".update_attempt")
	d.successes = st.Counter("cluster." + c.GetName() + ".update_success")
	d.failures = st.Counter("cluster." + c.GetName() + ".update_failure")
	d.emptyUpdates = st.Counter("cluster." + c.GetName() + ".update_empty")
	return d, nil
}

// configureResolver reads the resolver fields: typed_dns_resolver_config
// (c-ares or getaddrinfo), or the deprecated dns_resolvers,
// use_tcp_for_dns_lookups and dns_resolution_config.
func (d *dnsDiscovery) configureResolver(c *clusterv3.Cluster) error {
	r := d.resolver
	var (
		resolvers []*corev3.Address
		opts      *corev3.DnsResolverOptions
	)
	if tc := c.GetTypedDnsResolverConfig(); tc != nil {
		switch tc.GetName() {
		case caresName:
			var cfg caresv3.CaresDnsResolverConfig
			if err := tc.GetTypedConfig().UnmarshalTo(&cfg); err != nil {
				return fmt.Errorf("typed_dns_resolver_config %q: %w", tc.GetName(), err)
			}
			if err := d.configureCares(&cfg); err != nil {
				return fmt.Errorf("typed_dns_resolver_config %q: %w", tc.GetName(), err)
			}
			resolvers, opts = cfg.GetResolvers(), cfg.GetDnsResolverOptions()
		case getaddrinfoName:
			var cfg getaddrinfov3.GetAddrInfoDnsResolverConfig
			if err := tc.GetTypedConfig().UnmarshalTo(&cfg); err != nil {
				return fmt.Errorf("typed_dns_resolver_config %q: %w", tc.GetName(), err)
			}
			if cfg.GetNumRetries() != nil {
				r.Tries = int(cfg.GetNumRetries().GetValue()) + 1
			}
			// num_resolver_threads is how Envoy runs getaddrinfo; each
			// cluster resolves on its own goroutine here.
		default:
			return fmt.Errorf("typed_dns_resolver_config %q is not supported (want %s or %s)", tc.GetName(), caresName, getaddrinfoName)
		}
	} else {
		resolvers = c.GetDnsResolvers()                  //nolint:staticcheck // deprecated, still honoured as Envoy does
		if rc := c.GetDnsResolutionConfig(); rc != nil { //nolint:staticcheck // deprecated, still honoured
			resolvers = append(resolvers, rc.GetResolvers()...)
			opts = rc.GetDnsResolverOptions()
		}
		r.TCP = c.GetUseTcpForDnsLookups() //nolint:staticcheck // deprecated, still honoured
	}
	for i, a := range resolvers {
		sa := a.GetSocketAddress()
		ip, err := netip.ParseAddr(sa.GetAddress())
		if sa == nil || err != nil || sa.GetPortValue() == 0 {
			return fmt.Errorf("resolvers[%d]: want a socket_address with an IP and a port_value", i)
		}
		r.Servers = append(r.Servers, net.JoinHostPort(ip.String(), strconv.Itoa(int(sa.GetPortValue()))))
	}
	if opts.GetUseTcpForDnsLookups() {
		r.TCP = true
	}
	// no_default_search_domain: names are always looked up as given
	// (cluster endpoints are fully qualified), never with the search list.
	return nil
}

// configureCares honours the c-ares options that change what is resolved
// and refuses the ones that would need c-ares itself.
func (d *dnsDiscovery) configureCares(cfg *caresv3.CaresDnsResolverConfig) error {
	r := d.resolver
	r.Fallback = cfg.GetUseResolversAsFallback()
	if t := cfg.GetQueryTimeoutSeconds(); t != nil {
		r.Timeout = time.Duration(t.GetValue()) * time.Second
	}
	if t := cfg.GetQueryTries(); t != nil {
		r.Tries = int(t.GetValue())
	}
	// udp_max_queries bounds the queries one UDP socket sends; every query
	// here has a socket of its own, so any limit holds.
	// rotate_nameservers spreads load; the answer is the same.
	switch {
	case cfg.GetFilterUnroutableFamilies():
		return fmt.Errorf("filter_unroutable_families is not supported (remove it)")
	case cfg.GetEdns0MaxPayloadSize() != nil:
		return fmt.Errorf("edns0_max_payload_size is not supported (remove it)")
	case cfg.GetMaxUdpChannelDuration() != nil:
		return fmt.Errorf("max_udp_channel_duration is not supported (remove it)")
	case cfg.GetReinitChannelOnTimeout():
		return fmt.Errorf("reinit_channel_on_timeout is not supported (remove it)")
	case cfg.GetQcacheMaxTtl() != nil:
		return fmt.Errorf("qcache_max_ttl is not supported (remove it; strait-proxy keeps no DNS cache)")
	}
	return nil
}

// start begins resolving for cluster c; ready is called once, after the
// first round (successful or not), so that the cluster can leave warming.
// Calling start again, or after cancel, is a no-op.
func (d *dnsDiscovery) start(c *Cluster, log *slog.Logger, ready func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started {
		return
	}
	d.started = true
	ctx, cancel := context.WithCancel(context.Background())
	d.cancelRun = cancel
	d.done = make(chan struct{})
	go func() {
		defer close(d.done)
		d.run(ctx, c, log.With("cluster", c.Name), ready)
	}()
}

// cancel stops the resolving goroutine without waiting for it: it may be
// calling ready, which takes the manager's lock that the caller may hold.
func (d *dnsDiscovery) cancel() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.started = true
	if d.cancelRun != nil {
		d.cancelRun()
	}
}

// wait returns once the resolving goroutine (if any) has ended.
func (d *dnsDiscovery) wait() {
	d.mu.Lock()
	done := d.done
	d.mu.Unlock()
	if done != nil {
		<-done
	}
}

func (d *dnsDiscovery) run(ctx context.Context, c *Cluster, log *slog.Logger, ready func()) {
	last := make([][]Endpoint, len(d.targets))
	failuresInARow := 0
	for first := true; ; first = false {
		ttl, err := d.resolveAll(ctx, last)
		if ctx.Err() != nil {
			return
		}
		// Every address a name resolves to has its lb_endpoint's weight,
		// as in Envoy's STRICT_DNS.
		var eps []Endpoint
		var weights []uint32
		weighted := false
		for i, t := range last {
			eps = append(eps, t...)
			for range t {
				weights = append(weights, d.targets[i].weight)
			}
			weighted = weighted || d.targets[i].weight != 1
		}
		if !weighted {
			weights = nil
		}
		c.setEndpointList(endpointList{eps: eps, weights: weights})
		wait := d.refresh
		if err != nil {
			d.failures.Add(1)
			failuresInARow++
			log.Warn("dns resolution failed; keeping the previous endpoints", "error", err)
			if d.failureBase > 0 {
				wait = min(d.failureBase<<min(failuresInARow-1, 20), d.failureMax)
			}
		} else {
			d.successes.Add(1)
			failuresInARow = 0
			if len(eps) == 0 {
				d.emptyUpdates.Add(1)
			}
			if d.respectTTL && ttl > 0 {
				wait = ttl
			}
		}
		if d.jitter > 0 {
			wait += rand.N(d.jitter)
		}
		if first && ctx.Err() == nil {
			ready()
		}
		t := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// resolveAll resolves every target; a target that fails keeps its entry
// in last. It returns the smallest TTL of the answers and the first error.
func (d *dnsDiscovery) resolveAll(ctx context.Context, last [][]Endpoint) (time.Duration, error) {
	d.attempts.Add(1)
	var (
		ttl      time.Duration
		firstErr error
	)
	for i, t := range d.targets {
		res, err := d.resolver.Lookup(ctx, t.host, d.family)
		if err != nil {
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		ttl = dnsresolver.MinTTL(ttl, res.TTL)
		addrs := res.Addrs
		if d.logical && len(addrs) > 1 {
			addrs = addrs[:1]
		}
		eps := make([]Endpoint, 0, len(addrs))
		for _, a := range addrs {
			eps = append(eps, Endpoint{Network: "tcp", Address: netip.AddrPortFrom(a, uint16(t.port)).String(), transportMatch: t.transportMatch, localityMatch: t.localityMatch})
		}
		if !d.logical {
			// The order of an answer may rotate; the endpoint set is what
			// counts.
			slices.SortFunc(eps, func(a, b Endpoint) int { return strings.Compare(a.Address, b.Address) })
		}
		last[i] = eps
	}
	return ttl, firstErr
}
