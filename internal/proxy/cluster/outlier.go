package cluster

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/straitmesh/strait/internal/proxy/stats"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
)

// Envoy's outlier_detection defaults (outlier_detection.proto).
const (
	defaultODInterval      = 10 * time.Second
	defaultBaseEjection    = 30 * time.Second
	defaultMaxEjectionTime = 300 * time.Second
	defaultMaxEjectionPct  = 10
	defaultConsecutive     = 5
	defaultPanicThreshold  = 50.0
)

// LocalFailure is a failure that happened in the proxy rather than in an
// upstream response: Envoy's locally originated outlier detection results.
type LocalFailure int

const (
	// LocalConnectFailed is a connection that could not be opened.
	LocalConnectFailed LocalFailure = iota + 1
	// LocalTimeout is an upstream that did not answer in time.
	LocalTimeout
	// LocalReset is a connection that broke before a whole response.
	LocalReset
)

// httpCode is how Envoy counts a local failure when local and external
// errors are not split (DetectorHostMonitorImpl::putResultNoLocalExternalSplit).
func (f LocalFailure) httpCode() int {
	if f == LocalTimeout {
		return 504
	}
	return 503
}

// outlierConfig is the cluster's outlier_detection. The zero value (nil
// pointer on the cluster) means none.
type outlierConfig struct {
	consecutive5xx, enforce5xx         uint32
	consecutiveGateway, enforceGateway uint32
	consecutiveLocal, enforceLocal     uint32
	split                              bool
	interval, baseEjection, maxEject   time.Duration
	maxEjectionPct                     uint32
}

func parseOutlier(od *clusterv3.OutlierDetection) (*outlierConfig, error) {
	if od == nil {
		return nil, nil
	}
	const field = "outlier_detection"
	if err := fieldaudit.Only(field, od.ProtoReflect(), outlierFields); err != nil {
		return nil, err
	}
	// Envoy enables the success-rate detector unless its enforcing is 0
	// (the local-origin one only matters when errors are split).
	if v := od.GetEnforcingSuccessRate(); v == nil || v.GetValue() != 0 {
		return nil, fmt.Errorf("%s.enforcing_success_rate must be 0: the success-rate detector is not supported", field)
	}
	if v := od.GetEnforcingLocalOriginSuccessRate(); od.GetSplitExternalLocalOriginErrors() && (v == nil || v.GetValue() != 0) {
		return nil, fmt.Errorf("%s.enforcing_local_origin_success_rate must be 0: the success-rate detector is not supported", field)
	}
	for name, v := range map[string]uint32{
		"enforcing_failure_percentage":              od.GetEnforcingFailurePercentage().GetValue(),
		"enforcing_failure_percentage_local_origin": od.GetEnforcingFailurePercentageLocalOrigin().GetValue(),
	} {
		if v != 0 {
			return nil, fmt.Errorf("%s.%s must be 0: the failure-percentage detector is not supported", field, name)
		}
	}
	u32 := func(v interface{ GetValue() uint32 }, isNil bool, def uint32) uint32 {
		if isNil {
			return def
		}
		return v.GetValue()
	}
	dur := func(name string, d interface {
		AsDuration() time.Duration
		CheckValid() error
	}, isNil bool, def time.Duration) (time.Duration, error) {
		if isNil {
			return def, nil
		}
		if err := d.CheckValid(); err != nil || d.AsDuration() <= 0 {
			return 0, fmt.Errorf("%s.%s must be a positive duration", field, name)
		}
		return d.AsDuration(), nil
	}
	c := &outlierConfig{
		consecutive5xx:     u32(od.GetConsecutive_5Xx(), od.GetConsecutive_5Xx() == nil, defaultConsecutive),
		enforce5xx:         u32(od.GetEnforcingConsecutive_5Xx(), od.GetEnforcingConsecutive_5Xx() == nil, 100),
		consecutiveGateway: u32(od.GetConsecutiveGatewayFailure(), od.GetConsecutiveGatewayFailure() == nil, defaultConsecutive),
		enforceGateway:     u32(od.GetEnforcingConsecutiveGatewayFailure(), od.GetEnforcingConsecutiveGatewayFailure() == nil, 0),
		consecutiveLocal:   u32(od.GetConsecutiveLocalOriginFailure(), od.GetConsecutiveLocalOriginFailure() == nil, defaultConsecutive),
		enforceLocal:       u32(od.GetEnforcingConsecutiveLocalOriginFailure(), od.GetEnforcingConsecutiveLocalOriginFailure() == nil, 100),
		split:              od.GetSplitExternalLocalOriginErrors(),
		maxEjectionPct:     u32(od.GetMaxEjectionPercent(), od.GetMaxEjectionPercent() == nil, defaultMaxEjectionPct),
	}
	var err error
	if c.interval, err = dur("interval", od.GetInterval(), od.GetInterval() == nil, defaultODInterval); err != nil {
		return nil, err
	}
	if c.baseEjection, err = dur("base_ejection_time", od.GetBaseEjectionTime(), od.GetBaseEjectionTime() == nil, defaultBaseEjection); err != nil {
		return nil, err
	}
	if c.maxEject, err = dur("max_ejection_time", od.GetMaxEjectionTime(), od.GetMaxEjectionTime() == nil, max(defaultMaxEjectionTime, c.baseEjection)); err != nil {
		return nil, err
	}
	for name, v := range map[string]uint32{"enforcing_consecutive_5xx": c.enforce5xx, "enforcing_consecutive_gateway_failure": c.enforceGateway,
		"enforcing_consecutive_local_origin_failure": c.enforceLocal, "max_ejection_percent": c.maxEjectionPct} {
		if v > 100 {
			return nil, fmt.Errorf("%s.%s %d is above 100", field, name, v)
		}
	}
	return c, nil
}

// outlierState is one host's outlier detection counters (host.mu).
type outlierState struct {
	consecutive5xx, consecutiveGateway, consecutiveLocal uint32
	ejections                                            uint32    // the ejection time multiplier
	ejectedUntil                                         time.Time // zero when not ejected
	lastChange                                           time.Time // last ejection or return
}

// outlierStats are Envoy's cluster.NAME.outlier_detection.* counters.
type outlierStats struct {
	enforced, consecutive5xx, gateway, local, overflow *atomic.Uint64
	// detected* count thresholds reached, enforced or not (Envoy's
	// ejections_detected_*).
	detected5xx, detectedGateway, detectedLocal *atomic.Uint64
	activeGauge                                 *atomic.Int64
}

func newOutlierStats(st *stats.ClusterStats) outlierStats {
	const p = "outlier_detection."
	return outlierStats{
		enforced:       st.Counter(p + "ejections_enforced_total"),
		consecutive5xx: st.Counter(p + "ejections_enforced_consecutive_5xx"),
		gateway:        st.Counter(p + "ejections_enforced_consecutive_gateway_failure"),
		local:          st.Counter(p + "ejections_enforced_consecutive_local_origin_failure"),
		overflow:       st.Counter(p + "ejections_overflow"),
		activeGauge:    st.Gauge(p + "ejections_active"),

		detected5xx:     st.Counter(p + "ejections_detected_consecutive_5xx"),
		detectedGateway: st.Counter(p + "ejections_detected_consecutive_gateway_failure"),
		detectedLocal:   st.Counter(p + "ejections_detected_consecutive_local_origin_failure"),
	}
}

// ReportStatus feeds an upstream response status of a request sent to ep
// to outlier detection. Call it once per response, from any goroutine.
func (c *Cluster) ReportStatus(ep Endpoint, status int) {
	if c.outlier == nil || ep.h == nil {
		return
	}
	c.observe(ep.h, status, 0)
}

// ReportLocalFailure feeds a failure of the proxy to reach ep (connect
// failure, timeout, reset) to outlier detection.
func (c *Cluster) ReportLocalFailure(ep Endpoint, f LocalFailure) {
	if c.outlier == nil || ep.h == nil {
		return
	}
	if !c.outlier.split {
		c.observe(ep.h, f.httpCode(), 0)
		return
	}
	c.observe(ep.h, 0, f)
}

// ReportConnectSuccess tells outlier detection that a connection to ep
// opened, for a protocol that sees no response status (tcp_proxy):
// Envoy's LocalOriginConnectSuccessFinal, a success.
func (c *Cluster) ReportConnectSuccess(ep Endpoint) {
	if c.outlier == nil || ep.h == nil {
		return
	}
	if !c.outlier.split {
		c.observe(ep.h, 200, 0)
		return
	}
	o := ep.h.outlier()
	o.mu.Lock()
	o.s.consecutiveLocal = 0
	o.mu.Unlock()
}

// observe updates h's counters with one result (a status, or a local
// failure when errors are split) and ejects it when a threshold is
// reached, as Envoy's DetectorHostMonitorImpl does.
func (c *Cluster) observe(h *host, status int, local LocalFailure) {
	od := c.outlier
	now := time.Now()
	o := h.outlier()
	o.mu.Lock()
	s := &o.s
	c.refresh(h, s, now)
	var kind string
	switch {
	case local != 0:
		s.consecutiveLocal++
		if s.consecutiveLocal == od.consecutiveLocal && od.consecutiveLocal > 0 {
			s.consecutiveLocal = 0
			c.odStats.detectedLocal.Add(1)
			if enforce(od.enforceLocal) {
				kind = "local"
			}
		}
	case status >= 500 && status < 600:
		if status == 502 || status == 503 || status == 504 {
			s.consecutiveGateway++
			if s.consecutiveGateway == od.consecutiveGateway && od.consecutiveGateway > 0 {
				s.consecutiveGateway = 0
				c.odStats.detectedGateway.Add(1)
				if enforce(od.enforceGateway) {
					kind = "gateway"
				}
			}
		}
		s.consecutive5xx++
		if kind == "" && s.consecutive5xx == od.consecutive5xx && od.consecutive5xx > 0 {
			s.consecutive5xx = 0
			c.odStats.detected5xx.Add(1)
			if enforce(od.enforce5xx) {
				kind = "5xx"
			}
		}
	default:
		s.consecutive5xx, s.consecutiveGateway = 0, 0
		if od.split {
			s.consecutiveLocal = 0 // a response is a local-origin success
		}
	}
	o.mu.Unlock()
	if kind != "" {
		c.eject(h, kind, now)
	}
}

func enforce(pct uint32) bool { return pct >= 100 || pct > 0 && rand.Uint32N(100) < pct }

// eject ejects h unless max_ejection_percent of the hosts already are
// (Envoy ejects at least one host whatever the percentage).
func (c *Cluster) eject(h *host, kind string, now time.Time) {
	set := c.hosts.Load()
	if set == nil || h.ejected.Load() {
		return
	}
	ejected := 0
	for _, o := range set.hosts {
		if o.ejected.Load() {
			c.refreshLocked(o, now)
			if o.ejected.Load() {
				ejected++
			}
		}
	}
	if ejected > 0 && uint64(ejected+1)*100 > uint64(c.outlier.maxEjectionPct)*uint64(len(set.hosts)) {
		c.odStats.overflow.Add(1)
		return
	}
	o := h.outlier()
	o.mu.Lock()
	s := &o.s
	s.ejections++
	d := time.Duration(s.ejections) * c.outlier.baseEjection
	d = min(d, max(c.outlier.maxEject, c.outlier.baseEjection))
	s.ejectedUntil, s.lastChange = now.Add(d), now
	h.ejected.Store(true)
	o.mu.Unlock()
	c.odStats.activeGauge.Add(1)
	c.odStats.enforced.Add(1)
	switch kind {
	case "5xx":
		c.odStats.consecutive5xx.Add(1)
	case "gateway":
		c.odStats.gateway.Add(1)
	case "local":
		c.odStats.local.Add(1)
	}
	c.log.Info("outlier detection ejected a host", "cluster", c.Name, "host", h.ep.Address,
		"reason", "consecutive_"+kind, "for", d)
}

// refreshLocked is refresh taking h's outlier state lock.
func (c *Cluster) refreshLocked(h *host, now time.Time) {
	o := h.outlier()
	o.mu.Lock()
	c.refresh(h, &o.s, now)
	o.mu.Unlock()
}

// refresh brings h's ejection state s up to date at now (s's lock held):
// an ejection whose time passed ends, and each interval a host stays in
// service takes one off its ejection multiplier (Envoy's
// DetectorImpl::onIntervalTimer, done lazily here instead of on a timer).
func (c *Cluster) refresh(h *host, s *outlierState, now time.Time) {
	if h.ejected.Load() {
		if now.Before(s.ejectedUntil) {
			return
		}
		h.ejected.Store(false)
		s.ejectedUntil, s.lastChange = time.Time{}, now
		c.odStats.activeGauge.Add(-1)
	}
	if s.ejections > 0 && c.outlier.interval > 0 {
		n := uint32(now.Sub(s.lastChange) / c.outlier.interval)
		if n > 0 {
			s.ejections -= min(n, s.ejections)
			s.lastChange = s.lastChange.Add(time.Duration(n) * c.outlier.interval)
		}
	}
}

// ejectionExpired reports whether h is ejected past its time, so that a
// pick can return it to service.
func (c *Cluster) returnIfExpired(h *host, now time.Time) {
	if c.outlier != nil && h.ejected.Load() {
		c.refreshLocked(h, now)
	}
}
