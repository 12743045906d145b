package cluster

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/straitmesh/strait/internal/proxy/cluster/lb"
	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
)

// configureTraffic reads the cluster's traffic policy: load balancer,
// circuit breakers, outlier detection, common_lb_config, upstream
// connection options and health checks.
func (c *Cluster) configureTraffic(cfg *clusterv3.Cluster) error {
	var err error
	if c.lb, err = lb.Parse(cfg); err != nil {
		return err
	}
	if c.breaker, err = parseBreaker(cfg, c.Stats); err != nil {
		return err
	}
	if c.outlier, err = parseOutlier(cfg.GetOutlierDetection()); err != nil {
		return err
	}
	if c.outlier != nil {
		c.odStats = newOutlierStats(c.Stats)
	}
	c.panicThreshold = defaultPanicThreshold
	lbc := cfg.GetCommonLbConfig()
	if err := fieldaudit.Only("common_lb_config", lbc.ProtoReflect(), commonLbConfigFields); err != nil {
		return err
	}
	if _, ok := lbc.GetLocalityConfigSpecifier().(*clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig_); ok {
		switch c.lb.Policy {
		case clusterv3.Cluster_RING_HASH, clusterv3.Cluster_MAGLEV:
			return fmt.Errorf("common_lb_config.locality_weighted_lb_config is not supported with lb_policy %s (only ROUND_ROBIN, LEAST_REQUEST and RANDOM)", c.lb.Policy)
		}
		c.lb.LocalityWeighted = true
	}
	if p := lbc.GetHealthyPanicThreshold(); p != nil {
		if p.GetValue() < 0 || p.GetValue() > 100 {
			return fmt.Errorf("common_lb_config.healthy_panic_threshold %v is not a percentage", p.GetValue())
		}
		c.panicThreshold = p.GetValue()
	}
	if err := c.configureKeepalive(cfg); err != nil {
		return err
	}
	if c.hc, err = parseHealthChecks(c, cfg.GetHealthChecks(), c.Stats); err != nil {
		return err
	}
	return nil
}

// configureKeepalive applies upstream_connection_options.tcp_keepalive to
// the dialer (Envoy leaves keepalive off unless it is set; strait's dialer
// had Go's default on, which stays when the option is absent).
func (c *Cluster) configureKeepalive(cfg *clusterv3.Cluster) error {
	o := cfg.GetUpstreamConnectionOptions()
	if err := fieldaudit.Only("upstream_connection_options", o.ProtoReflect(), upstreamConnectionOptionsFields); err != nil {
		return err
	}
	ka := o.GetTcpKeepalive()
	if ka == nil {
		return nil
	}
	// Unset parts keep the system's defaults (-1 in KeepAliveConfig is
	// "leave as is", 0 Go's own default).
	kc := net.KeepAliveConfig{Enable: true, Idle: -1, Interval: -1, Count: -1}
	if v := ka.GetKeepaliveTime(); v != nil {
		kc.Idle = time.Duration(v.GetValue()) * time.Second
	}
	if v := ka.GetKeepaliveInterval(); v != nil {
		kc.Interval = time.Duration(v.GetValue()) * time.Second
	}
	if v := ka.GetKeepaliveProbes(); v != nil {
		kc.Count = int(v.GetValue())
	}
	c.dialer.KeepAliveConfig = kc
	return nil
}

// Pick chooses the upstream endpoint for a connection (tcp_proxy, the xDS
// client) or a request without a hash. originalDst is the downstream
// connection's original destination, used by ORIGINAL_DST clusters.
func (c *Cluster) Pick(originalDst netip.AddrPort) (Endpoint, error) {
	return c.pick(originalDst, 0, false, nil)
}

// PickExcluding is Pick for a retry that must avoid the priority levels
// in excluded (the previous_priorities retry priority), unless that
// leaves no healthy level.
func (c *Cluster) PickExcluding(originalDst netip.AddrPort, excluded []uint32) (Endpoint, error) {
	return c.pick(originalDst, 0, false, excluded)
}

// PickRequest admits one HTTP request (the max_requests circuit breaker:
// ErrOverflow when it is open) and chooses its endpoint, by hash when
// hasHash (RING_HASH and MAGLEV; the other policies ignore it). The caller
// must call Finish with the endpoint once the request is over, whatever
// happened, unless PickRequest returned an error.
func (c *Cluster) PickRequest(originalDst netip.AddrPort, hash uint64, hasHash bool) (Endpoint, error) {
	b := c.breaker
	if !acquire(&b.requests, b.maxRequests, b.st.rqOpen, b.st.rqRemaining) {
		b.st.pendingOverflow.Add(1) // Envoy counts max_requests overflow here too
		return Endpoint{}, ErrOverflow
	}
	ep, err := c.pick(originalDst, hash, hasHash, nil)
	if err != nil {
		release(&b.requests, b.maxRequests, b.st.rqOpen, b.st.rqRemaining)
		return ep, err
	}
	ep.counted = true
	b.st.rqActive.Add(1)
	if ep.h != nil {
		ep.h.active.Add(1)
	}
	return ep, nil
}

// Finish ends a request admitted by PickRequest.
func (c *Cluster) Finish(ep Endpoint) {
	if !ep.counted {
		return
	}
	if ep.h != nil {
		ep.h.active.Add(-1)
	}
	b := c.breaker
	b.st.rqActive.Add(-1)
	release(&b.requests, b.maxRequests, b.st.rqOpen, b.st.rqRemaining)
}

func (c *Cluster) pick(originalDst netip.AddrPort, hash uint64, hasHash bool, excluded []uint32) (Endpoint, error) {
	if c.Kind == KindOriginalDst {
		if !originalDst.IsValid() {
			return Endpoint{}, ErrNoHealthyUpstream
		}
		return Endpoint{Network: "tcp", Address: originalDst.String()}, nil
	}
	s := c.hosts.Load()
	if s == nil || len(s.hosts) == 0 {
		c.Stats.NoHealthy.Add(1)
		return Endpoint{}, ErrNoHealthyUpstream
	}
	var h *host
	var priority uint32
	if s.levels != nil {
		h, priority = c.pickLevels(s, hash, hasHash, excluded)
	} else if ss := c.lb.Slow; ss != nil && time.Since(s.newest) < ss.Window() {
		// A host is warming up: weights change with time.
		h = lb.PickSlow(c.lb, s.hosts, time.Now(), nil)
		if (c.outlier != nil || c.hc != nil) && !h.healthy() {
			h = c.pickHealthy(s, h, 0, false)
		}
	} else {
		h = s.lb.Pick(hash, hasHash, nil)
		if c.outlier != nil || c.hc != nil {
			h = c.pickHealthy(s, h, hash, hasHash)
		}
	}
	if h == nil {
		c.Stats.NoHealthy.Add(1)
		return Endpoint{}, ErrNoHealthyUpstream
	}
	ep := h.ep.endpoint()
	ep.h = h
	ep.priority = priority
	return ep, nil
}

// pickHealthy keeps first when it is healthy; otherwise it picks again
// among the healthy hosts, unless so few are healthy that the cluster is in
// panic (healthy_panic_threshold): then every host may serve, as in Envoy.
func (c *Cluster) pickHealthy(s *hostSet, first *host, hash uint64, hasHash bool) *host {
	now := time.Now()
	c.returnIfExpired(first, now)
	if first.healthy() {
		return first
	}
	healthy := 0
	for _, h := range s.hosts {
		c.returnIfExpired(h, now)
		if h.healthy() {
			healthy++
		}
	}
	if float64(healthy)*100 < c.panicThreshold*float64(len(s.hosts)) {
		c.Stats.Counter("lb_healthy_panic").Add(1)
		return first
	}
	return s.lb.Pick(hash, hasHash, (*host).healthy)
}
