package gen

import (
	"math"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
	rawbufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	upstreamhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	xdstype "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/mesh"
)

// trafficPolicyFor is the DestinationRule traffic policy of host's cluster
// for port and subset, merged as Istio merges them
// (networking/util.MergeSubsetTrafficPolicy): the rule's port-level
// settings replace its top-level policy for that port, and the subset's
// policy (its own port-level settings first) overrides what it sets. nil
// when no rule applies.
func trafficPolicyFor(snap *mesh.Snapshot, ns, host, subset string, port uint32) *networking.TrafficPolicy {
	dr := snap.DestinationRuleFor(ns, host)
	if dr == nil {
		return nil
	}
	rule := dr.DestinationRule()
	policy, _ := portLevelPolicy(rule.GetTrafficPolicy(), port)
	if subset == "" {
		return policy
	}
	var subsetPolicy *networking.TrafficPolicy
	for _, ss := range rule.GetSubsets() {
		if ss.GetName() == subset {
			subsetPolicy = ss.GetTrafficPolicy()
			break
		}
	}
	if subsetPolicy == nil {
		return policy
	}
	sp, hasPortLevel := portLevelPolicy(subsetPolicy, port)
	if policy == nil {
		return sp
	}
	merged := shallowPolicy(policy)
	if sp.GetConnectionPool() != nil || hasPortLevel {
		merged.ConnectionPool = sp.GetConnectionPool()
	}
	if sp.GetOutlierDetection() != nil || hasPortLevel {
		merged.OutlierDetection = sp.GetOutlierDetection()
	}
	if sp.GetLoadBalancer() != nil || hasPortLevel {
		merged.LoadBalancer = sp.GetLoadBalancer()
	}
	if sp.GetTls() != nil || hasPortLevel {
		merged.Tls = sp.GetTls()
	}
	if sp.GetProxyProtocol() != nil {
		merged.ProxyProtocol = sp.GetProxyProtocol()
	}
	if sp.GetRetryBudget() != nil {
		merged.RetryBudget = sp.GetRetryBudget()
	}
	return merged
}

// portLevelPolicy returns the port-level settings of p for port, which
// replace the top-level ones whole (fields they omit take their defaults,
// not the top level's), and whether there were any.
func portLevelPolicy(p *networking.TrafficPolicy, port uint32) (*networking.TrafficPolicy, bool) {
	if p == nil {
		return nil, false
	}
	for _, pl := range p.GetPortLevelSettings() {
		if pl.GetPort().GetNumber() == port {
			return &networking.TrafficPolicy{
				ConnectionPool:   pl.GetConnectionPool(),
				LoadBalancer:     pl.GetLoadBalancer(),
				OutlierDetection: pl.GetOutlierDetection(),
				Tls:              pl.GetTls(),
			}, true
		}
	}
	return p, false
}

func shallowPolicy(p *networking.TrafficPolicy) *networking.TrafficPolicy {
	return &networking.TrafficPolicy{
		ConnectionPool:   p.GetConnectionPool(),
		LoadBalancer:     p.GetLoadBalancer(),
		OutlierDetection: p.GetOutlierDetection(),
		Tls:              p.GetTls(),
		ProxyProtocol:    p.GetProxyProtocol(),
		Tunnel:           p.GetTunnel(),
		RetryBudget:      p.GetRetryBudget(),
	}
}

// applyTrafficPolicy sets the Envoy fields of an outbound cluster from its
// traffic policy, with the fields Istio's cluster builder uses for them
// (networking/core/cluster_traffic_policy.go: applyConnectionPool,
// applyOutlierDetection, applyLoadBalancer). Every outbound cluster gets
// Istio's defaults: LEAST_REQUEST and circuit breakers without limits.
func applyTrafficPolicy(c *cluster.Cluster, p *networking.TrafficPolicy, port mesh.Port) {
	applyConnectionPool(c, p.GetConnectionPool(), p.GetRetryBudget())
	applyOutlierDetection(c, p.GetOutlierDetection())
	applyLoadBalancer(c, p.GetLoadBalancer())
}

// defaultThresholds are Istio's circuit breakers when nothing limits them
// (getDefaultCircuitBreakerThresholds): no limit, where Envoy's own
// defaults would cap a cluster at 1024 connections and requests.
func defaultThresholds() *cluster.CircuitBreakers_Thresholds {
	return &cluster.CircuitBreakers_Thresholds{
		MaxRetries:         wrapperspb.UInt32(math.MaxUint32),
		MaxRequests:        wrapperspb.UInt32(math.MaxUint32),
		MaxConnections:     wrapperspb.UInt32(math.MaxUint32),
		MaxPendingRequests: wrapperspb.UInt32(math.MaxUint32),
		TrackRemaining:     true,
	}
}

// defaultCircuitBreakers gives the clusters that carry traffic and have no
// circuit breakers yet (inbound, passthrough) Istio's defaults, as its
// cluster builder applies an empty connection pool to them. The
// BlackHoleCluster, which carries nothing, has none, as in Istio.
func defaultCircuitBreakers(cs []*cluster.Cluster) []*cluster.Cluster {
	for _, c := range cs {
		if c.CircuitBreakers == nil && c.Name != BlackHoleCluster {
			c.CircuitBreakers = &cluster.CircuitBreakers{Thresholds: []*cluster.CircuitBreakers_Thresholds{defaultThresholds()}}
		}
	}
	return cs
}

func applyConnectionPool(c *cluster.Cluster, cp *networking.ConnectionPoolSettings, rb *networking.TrafficPolicy_RetryBudget) {
	t := defaultThresholds()
	applyRetryBudget(t, rb)
	var common core.HttpProtocolOptions
	hasCommon := false
	if h := cp.GetHttp(); h != nil {
		if h.Http2MaxRequests > 0 {
			t.MaxRequests = wrapperspb.UInt32(uint32(h.Http2MaxRequests))
		}
		if h.Http1MaxPendingRequests > 0 {
			t.MaxPendingRequests = wrapperspb.UInt32(uint32(h.Http1MaxPendingRequests))
		}
		if h.MaxRetries > 0 {
			t.MaxRetries = wrapperspb.UInt32(uint32(h.MaxRetries))
		}
		if h.IdleTimeout != nil {
			common.IdleTimeout, hasCommon = durationpb.New(h.IdleTimeout.AsDuration()), true
		}
		if h.MaxRequestsPerConnection > 0 {
			common.MaxRequestsPerConnection, hasCommon = wrapperspb.UInt32(uint32(h.MaxRequestsPerConnection)), true
		}
		if h.Http2KeepAlive != nil {
			// Istio makes the (possibly empty) common options whenever
			// http2KeepAlive is set.
			hasCommon = true
		}
		switch {
		case h.UseClientProtocol:
			setUpstreamHTTPOptions(c, func(o *upstreamhttp.HttpProtocolOptions) {
				o.UpstreamProtocolOptions = &upstreamhttp.HttpProtocolOptions_UseDownstreamProtocolConfig{
					UseDownstreamProtocolConfig: &upstreamhttp.HttpProtocolOptions_UseDownstreamHttpConfig{
						HttpProtocolOptions:  &core.Http1ProtocolOptions{},
						Http2ProtocolOptions: &core.Http2ProtocolOptions{},
					},
				}
			})
		case h.H2UpgradePolicy == networking.ConnectionPoolSettings_HTTPSettings_UPGRADE:
			setUpstreamHTTPOptions(c, func(o *upstreamhttp.HttpProtocolOptions) {
				o.UpstreamProtocolOptions = &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_{
					ExplicitHttpConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig{
						ProtocolConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
							Http2ProtocolOptions: &core.Http2ProtocolOptions{},
						},
					},
				}
			})
		}
	}
	if tcp := cp.GetTcp(); tcp != nil {
		if tcp.ConnectTimeout != nil {
			c.ConnectTimeout = durationpb.New(tcp.ConnectTimeout.AsDuration())
		}
		if tcp.MaxConnections > 0 {
			t.MaxConnections = wrapperspb.UInt32(uint32(tcp.MaxConnections))
		}
		if tcp.MaxConnectionDuration != nil {
			common.MaxConnectionDuration, hasCommon = durationpb.New(tcp.MaxConnectionDuration.AsDuration()), true
		}
		if common.IdleTimeout == nil && tcp.IdleTimeout != nil {
			common.IdleTimeout, hasCommon = durationpb.New(tcp.IdleTimeout.AsDuration()), true
		}
		if ka := tcp.TcpKeepalive; ka != nil {
			// Istio's applyTCPKeepalive: seconds, unset parts left to the
			// system.
			kc := &core.TcpKeepalive{}
			if ka.Probes > 0 {
				kc.KeepaliveProbes = wrapperspb.UInt32(ka.Probes)
			}
			if ka.Time != nil {
				kc.KeepaliveTime = wrapperspb.UInt32(uint32(ka.Time.AsDuration().Seconds()))
			}
			if ka.Interval != nil {
				kc.KeepaliveInterval = wrapperspb.UInt32(uint32(ka.Interval.AsDuration().Seconds()))
			}
			c.UpstreamConnectionOptions = &cluster.UpstreamConnectionOptions{TcpKeepalive: kc}
		}
	}
	c.CircuitBreakers = &cluster.CircuitBreakers{Thresholds: []*cluster.CircuitBreakers_Thresholds{t}}
	if hasCommon {
		setUpstreamHTTPOptions(c, func(o *upstreamhttp.HttpProtocolOptions) { o.CommonHttpProtocolOptions = &common })
	}
	// maxConcurrentStreams applies to a cluster that speaks HTTP/2 (its
	// port's protocol, or h2UpgradePolicy UPGRADE), as in Istio.
	if n := cp.GetHttp().GetMaxConcurrentStreams(); n > 0 && c.TypedExtensionProtocolOptions[httpProtocolOptionsKey] != nil {
		setUpstreamHTTPOptions(c, func(o *upstreamhttp.HttpProtocolOptions) {
			if h2 := o.GetExplicitHttpConfig().GetHttp2ProtocolOptions(); h2 != nil {
				h2.MaxConcurrentStreams = wrapperspb.UInt32(uint32(n))
			}
		})
	}
	// http2KeepAlive likewise: connection_keepalive PINGs on an HTTP/2
	// cluster (Istio's applyConnectionPool).
	if ka := cp.GetHttp().GetHttp2KeepAlive(); ka != nil && c.TypedExtensionProtocolOptions[httpProtocolOptionsKey] != nil {
		setUpstreamHTTPOptions(c, func(o *upstreamhttp.HttpProtocolOptions) {
			if h2 := o.GetExplicitHttpConfig().GetHttp2ProtocolOptions(); h2 != nil {
				h2.ConnectionKeepalive = &core.KeepaliveSettings{
					Interval: durationpb.New(ka.GetInterval().AsDuration()),
					Timeout:  durationpb.New(ka.GetTimeout().AsDuration()),
				}
			}
		})
	}
}

// applyRetryBudget sets the thresholds' retry_budget, which replaces
// max_retries in Envoy, with Istio's defaults (applyRetryBudget): 20 %
// and a minimum of 3 concurrent retries. budgetInterval is refused at
// load, so it is never emitted.
func applyRetryBudget(t *cluster.CircuitBreakers_Thresholds, rb *networking.TrafficPolicy_RetryBudget) {
	if rb == nil {
		return
	}
	percent := 20.0
	if rb.Percent != nil {
		percent = rb.Percent.Value
	}
	minConcurrency := uint32(3)
	if rb.MinRetryConcurrency > 0 {
		minConcurrency = rb.MinRetryConcurrency
	}
	t.RetryBudget = &cluster.CircuitBreakers_Thresholds_RetryBudget{
		BudgetPercent:       &xdstype.Percent{Value: percent},
		MinRetryConcurrency: wrapperspb.UInt32(minConcurrency),
	}
}

// Envoy's upstream PROXY protocol transport socket and the plaintext
// socket it wraps when the cluster has no other.
const (
	proxyProtocolSocketName = "envoy.transport_sockets.upstream_proxy_protocol"
	rawBufferSocketName     = "envoy.transport_sockets.raw_buffer"
)

// applyUpstreamProxyProtocol wraps the cluster's transport socket (its
// TLS, or raw_buffer when it has none), and each of its
// transport_socket_matches, in the upstream_proxy_protocol socket, as
// Istio's applyUpstreamProxyProtocol does; it runs after the TLS socket
// is set (mtls.go).
func applyUpstreamProxyProtocol(c *cluster.Cluster, pp *networking.TrafficPolicy_ProxyProtocol) {
	if pp == nil {
		return
	}
	wrap := func(inner *core.TransportSocket) *core.TransportSocket {
		return &core.TransportSocket{
			Name: proxyProtocolSocketName,
			ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: mustAny(&proxyprotocolv3.ProxyProtocolUpstreamTransport{
				Config:          &core.ProxyProtocolConfig{Version: core.ProxyProtocolConfig_Version(pp.GetVersion())},
				TransportSocket: inner,
			})},
		}
	}
	if c.TransportSocket == nil && len(c.TransportSocketMatches) == 0 {
		c.TransportSocket = wrap(&core.TransportSocket{
			Name:       rawBufferSocketName,
			ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: mustAny(&rawbufferv3.RawBuffer{})},
		})
		return
	}
	if c.TransportSocket != nil {
		c.TransportSocket = wrap(c.TransportSocket)
	}
	for _, m := range c.TransportSocketMatches {
		m.TransportSocket = wrap(m.TransportSocket)
	}
}

// setUpstreamHTTPOptions edits the cluster's HttpProtocolOptions (in
// typed_extension_protocol_options, where Istio puts them), making them
// when absent.
func setUpstreamHTTPOptions(c *cluster.Cluster, edit func(*upstreamhttp.HttpProtocolOptions)) {
	o := &upstreamhttp.HttpProtocolOptions{}
	if a := c.TypedExtensionProtocolOptions[httpProtocolOptionsKey]; a != nil {
		if err := a.UnmarshalTo(o); err != nil {
			panic("gen: own HttpProtocolOptions do not unmarshal: " + err.Error())
		}
	}
	edit(o)
	if o.UpstreamProtocolOptions == nil {
		// Envoy requires one: HTTP/1.1 unless the port said otherwise.
		o.UpstreamProtocolOptions = &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{
					HttpProtocolOptions: &core.Http1ProtocolOptions{},
				},
			},
		}
	}
	if c.TypedExtensionProtocolOptions == nil {
		c.TypedExtensionProtocolOptions = map[string]*anypb.Any{}
	}
	c.TypedExtensionProtocolOptions[httpProtocolOptionsKey] = mustAny(o)
}

func applyOutlierDetection(c *cluster.Cluster, od *networking.OutlierDetection) {
	if od == nil {
		return
	}
	out := &cluster.OutlierDetection{EnforcingSuccessRate: wrapperspb.UInt32(0)}
	if e := od.GetConsecutive_5XxErrors(); e != nil {
		out.Consecutive_5Xx = wrapperspb.UInt32(e.GetValue())
		out.EnforcingConsecutive_5Xx = wrapperspb.UInt32(enforcing(e.GetValue()))
	}
	if e := od.GetConsecutiveGatewayErrors(); e != nil {
		out.ConsecutiveGatewayFailure = wrapperspb.UInt32(e.GetValue())
		out.EnforcingConsecutiveGatewayFailure = wrapperspb.UInt32(enforcing(e.GetValue()))
	}
	if od.Interval != nil {
		out.Interval = durationpb.New(od.Interval.AsDuration())
	}
	if od.BaseEjectionTime != nil {
		out.BaseEjectionTime = durationpb.New(od.BaseEjectionTime.AsDuration())
	}
	if od.MaxEjectionPercent > 0 {
		out.MaxEjectionPercent = wrapperspb.UInt32(uint32(od.MaxEjectionPercent))
	}
	if od.SplitExternalLocalOriginErrors {
		out.SplitExternalLocalOriginErrors = true
		if v := od.GetConsecutiveLocalOriginFailures().GetValue(); v > 0 {
			out.ConsecutiveLocalOriginFailure = wrapperspb.UInt32(v)
			out.EnforcingConsecutiveLocalOriginFailure = wrapperspb.UInt32(100)
		}
		out.EnforcingLocalOriginSuccessRate = wrapperspb.UInt32(0)
	}
	c.OutlierDetection = out
	// Istio turns panic mode off unless minHealthPercent asks for it
	// (Envoy's default would be 50%).
	if od.MinHealthPercent >= 0 {
		if c.CommonLbConfig == nil {
			c.CommonLbConfig = &cluster.Cluster_CommonLbConfig{}
		}
		c.CommonLbConfig.HealthyPanicThreshold = &xdstype.Percent{Value: float64(od.MinHealthPercent)}
	}
}

// enforcing is 100 % for a detector with a threshold, 0 (off) without.
func enforcing(v uint32) uint32 {
	if v > 0 {
		return 100
	}
	return 0
}

func applyLoadBalancer(c *cluster.Cluster, lb *networking.LoadBalancerSettings) {
	if c.GetType() == cluster.Cluster_ORIGINAL_DST {
		// A passthrough cluster (resolution NONE) picks its one host
		// itself: Istio keeps CLUSTER_PROVIDED whatever the rule says.
		return
	}
	switch lb.GetSimple() {
	case networking.LoadBalancerSettings_RANDOM:
		c.LbPolicy = cluster.Cluster_RANDOM
	case networking.LoadBalancerSettings_ROUND_ROBIN:
		c.LbPolicy = cluster.Cluster_ROUND_ROBIN
	case networking.LoadBalancerSettings_PASSTHROUGH:
		c.LbPolicy = cluster.Cluster_CLUSTER_PROVIDED
		c.ClusterDiscoveryType = &cluster.Cluster_Type{Type: cluster.Cluster_ORIGINAL_DST}
		c.EdsClusterConfig = nil
		c.LoadAssignment = nil
		return
	default:
		// LEAST_REQUEST, LEAST_CONN (its old name) and UNSPECIFIED: Istio's
		// default algorithm.
		c.LbPolicy = cluster.Cluster_LEAST_REQUEST
	}
	ch := lb.GetConsistentHash()
	if ch == nil {
		applyWarmup(c, lb)
		return
	}
	switch {
	case ch.GetMaglev() != nil:
		c.LbPolicy = cluster.Cluster_MAGLEV
		if n := ch.GetMaglev().GetTableSize(); n != 0 {
			c.LbConfig = &cluster.Cluster_MaglevLbConfig_{MaglevLbConfig: &cluster.Cluster_MaglevLbConfig{TableSize: wrapperspb.UInt64(n)}}
		}
	case ch.GetRingHash() != nil:
		c.LbPolicy = cluster.Cluster_RING_HASH
		if n := ch.GetRingHash().GetMinimumRingSize(); n != 0 {
			c.LbConfig = &cluster.Cluster_RingHashLbConfig_{RingHashLbConfig: &cluster.Cluster_RingHashLbConfig{MinimumRingSize: wrapperspb.UInt64(n)}}
		}
	default:
		n := uint64(1024)                         // Envoy's default, which Istio spells out
		if v := ch.GetMinimumRingSize(); v != 0 { //nolint:staticcheck // deprecated, still honoured by Istio
			n = v
		}
		c.LbPolicy = cluster.Cluster_RING_HASH
		c.LbConfig = &cluster.Cluster_RingHashLbConfig_{RingHashLbConfig: &cluster.Cluster_RingHashLbConfig{MinimumRingSize: wrapperspb.UInt64(n)}}
	}
}

// consistentHashFor is the consistentHash of the destination's policy, as
// Istio's route builder looks it up (route.HashForHTTPDestination): the
// subset's port-level settings, else the subset's, else the rule's
// port-level settings, else the rule's.
func consistentHashFor(snap *mesh.Snapshot, ns, host, subset string, port uint32) *networking.LoadBalancerSettings_ConsistentHashLB {
	dr := snap.DestinationRuleFor(ns, host)
	if dr == nil {
		return nil
	}
	rule := dr.DestinationRule()
	portHash := func(p *networking.TrafficPolicy) *networking.LoadBalancerSettings_ConsistentHashLB {
		for _, pl := range p.GetPortLevelSettings() {
			if pl.GetPort().GetNumber() == port {
				return pl.GetLoadBalancer().GetConsistentHash()
			}
		}
		return nil
	}
	if subset != "" {
		for _, ss := range rule.GetSubsets() {
			if ss.GetName() != subset {
				continue
			}
			if h := portHash(ss.GetTrafficPolicy()); h != nil {
				return h
			}
			if h := ss.GetTrafficPolicy().GetLoadBalancer().GetConsistentHash(); h != nil {
				return h
			}
			break
		}
	}
	if h := portHash(rule.GetTrafficPolicy()); h != nil {
		return h
	}
	return rule.GetTrafficPolicy().GetLoadBalancer().GetConsistentHash()
}

// hashPolicy is Istio's ConsistentHashToHashPolicy: the route action's
// hash_policy for a consistentHash; nil for none.
func hashPolicy(ch *networking.LoadBalancerSettings_ConsistentHashLB) *route.RouteAction_HashPolicy {
	switch k := ch.GetHashKey().(type) {
	case *networking.LoadBalancerSettings_ConsistentHashLB_HttpHeaderName:
		return &route.RouteAction_HashPolicy{PolicySpecifier: &route.RouteAction_HashPolicy_Header_{
			Header: &route.RouteAction_HashPolicy_Header{HeaderName: k.HttpHeaderName}}}
	case *networking.LoadBalancerSettings_ConsistentHashLB_HttpCookie:
		cookie := &route.RouteAction_HashPolicy_Cookie{Name: k.HttpCookie.GetName(), Path: k.HttpCookie.GetPath()}
		if ttl := k.HttpCookie.GetTtl(); ttl != nil {
			cookie.Ttl = durationpb.New(ttl.AsDuration())
		}
		for _, a := range k.HttpCookie.GetAttributes() {
			cookie.Attributes = append(cookie.Attributes, &route.RouteAction_HashPolicy_CookieAttribute{Name: a.GetName(), Value: a.GetValue()})
		}
		return &route.RouteAction_HashPolicy{PolicySpecifier: &route.RouteAction_HashPolicy_Cookie_{Cookie: cookie}}
	case *networking.LoadBalancerSettings_ConsistentHashLB_UseSourceIp:
		return &route.RouteAction_HashPolicy{PolicySpecifier: &route.RouteAction_HashPolicy_ConnectionProperties_{
			ConnectionProperties: &route.RouteAction_HashPolicy_ConnectionProperties{SourceIp: k.UseSourceIp}}}
	case *networking.LoadBalancerSettings_ConsistentHashLB_HttpQueryParameterName:
		return &route.RouteAction_HashPolicy{PolicySpecifier: &route.RouteAction_HashPolicy_QueryParameter_{
			QueryParameter: &route.RouteAction_HashPolicy_QueryParameter{Name: k.HttpQueryParameterName}}}
	}
	return nil
}

// appendHashPolicy adds to a the hash_policy of the destination's
// consistentHash, if any (Istio appends one per destination of a route).
func appendHashPolicy(a *route.RouteAction, snap *mesh.Snapshot, ns, host, subset string, port uint32) {
	if hp := hashPolicy(consistentHashFor(snap, ns, host, subset, port)); hp != nil {
		a.HashPolicy = append(a.HashPolicy, hp)
	}
}

// destinationPort is the service port a route destination goes to, as
// destinationCluster picks it.
func destinationPort(snap *mesh.Snapshot, host string, d *networking.Destination, port uint32) uint32 {
	if p := d.GetPort().GetNumber(); p != 0 {
		return p
	}
	if svc := snap.Service(host); svc != nil && len(svc.Ports) == 1 {
		return svc.Ports[0].Number
	}
	return port
}

// applyWarmup is Istio's setWarmup (and the older warmupDurationSecs): the
// slow start of ROUND_ROBIN and LEAST_REQUEST clusters. Istio gives the
// aggression a runtime key that can never be set, "(".
func applyWarmup(c *cluster.Cluster, lb *networking.LoadBalancerSettings) {
	var ss *cluster.Cluster_SlowStartConfig
	switch {
	case lb.GetWarmup() != nil:
		w := lb.GetWarmup()
		aggression, minPct := 1.0, 10.0
		if a := w.GetAggression(); a != nil {
			aggression = a.GetValue()
		}
		if m := w.GetMinimumPercent(); m != nil {
			minPct = m.GetValue()
		}
		ss = &cluster.Cluster_SlowStartConfig{
			SlowStartWindow:  durationpb.New(w.GetDuration().AsDuration()),
			Aggression:       &core.RuntimeDouble{DefaultValue: aggression, RuntimeKey: "("},
			MinWeightPercent: &xdstype.Percent{Value: minPct},
		}
	case lb.GetWarmupDurationSecs() != nil: //nolint:staticcheck // deprecated, still honoured by Istio
		ss = &cluster.Cluster_SlowStartConfig{SlowStartWindow: durationpb.New(lb.GetWarmupDurationSecs().AsDuration())} //nolint:staticcheck // as above
	default:
		return
	}
	switch c.LbPolicy {
	case cluster.Cluster_ROUND_ROBIN:
		c.LbConfig = &cluster.Cluster_RoundRobinLbConfig_{RoundRobinLbConfig: &cluster.Cluster_RoundRobinLbConfig{SlowStartConfig: ss}}
	case cluster.Cluster_LEAST_REQUEST:
		c.LbConfig = &cluster.Cluster_LeastRequestLbConfig_{LeastRequestLbConfig: &cluster.Cluster_LeastRequestLbConfig{SlowStartConfig: ss}}
	}
}
