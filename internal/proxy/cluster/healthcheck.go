package cluster

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/straitmesh/strait/internal/proxy/stats"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
)

// defaultNoTrafficInterval is Envoy's no_traffic_interval: the check
// interval of a cluster that has not served a request yet.
const defaultNoTrafficInterval = 60 * time.Second

// healthChecker runs a cluster's active health checks (Envoy's
// health_checks with http_health_check, or tcp_health_check that only
// connects): every interval each host is checked, and a host turns
// unhealthy after unhealthy_threshold failures in a row, healthy again
// after healthy_threshold successes. A host starts unhealthy and turns
// healthy on its first success, as Envoy's new hosts do; the first round
// runs as soon as the cluster has endpoints.
type healthChecker struct {
	// Set at creation, read-only.
	c                      *Cluster
	interval, timeout      time.Duration
	noTraffic              time.Duration
	unhealthyN, healthyN   uint32
	http                   bool // else a TCP connect check
	path, hostHeader, verb string
	expected               []*typev3.Int64Range // [start, end) status ranges
	st                     hcStats

	hosts   atomic.Pointer[hostSet] // the cluster's current hosts
	start   sync.Once
	stopped chan struct{}
	stop    sync.Once
}

type hcStats struct {
	attempt, success, failure *atomic.Uint64
}

func parseHealthChecks(c *Cluster, hcs []*corev3.HealthCheck, st *stats.ClusterStats) (*healthChecker, error) {
	if len(hcs) == 0 {
		return nil, nil
	}
	if len(hcs) > 1 {
		return nil, fmt.Errorf("health_checks: only one health check per cluster is supported, got %d", len(hcs))
	}
	hc := hcs[0]
	const field = "health_checks[0]"
	if err := fieldaudit.Only(field, hc.ProtoReflect(), healthCheckFields); err != nil {
		return nil, err
	}
	for name, d := range map[string]interface{ AsDuration() time.Duration }{"timeout": hc.GetTimeout(), "interval": hc.GetInterval()} {
		if d.AsDuration() <= 0 {
			return nil, fmt.Errorf("%s.%s must be a positive duration", field, name)
		}
	}
	h := &healthChecker{
		c: c, interval: hc.GetInterval().AsDuration(), timeout: hc.GetTimeout().AsDuration(),
		noTraffic:  defaultNoTrafficInterval,
		unhealthyN: max(hc.GetUnhealthyThreshold().GetValue(), 1),
		healthyN:   max(hc.GetHealthyThreshold().GetValue(), 1),
		stopped:    make(chan struct{}),
		st: hcStats{attempt: st.Counter("health_check.attempt"), success: st.Counter("health_check.success"),
			failure: st.Counter("health_check.failure")},
	}
	if d := hc.GetNoTrafficInterval(); d != nil {
		if d.AsDuration() <= 0 {
			return nil, fmt.Errorf("%s.no_traffic_interval must be a positive duration", field)
		}
		h.noTraffic = d.AsDuration()
	}
	switch {
	case hc.GetHttpHealthCheck() != nil:
		hh := hc.GetHttpHealthCheck()
		f := field + ".http_health_check"
		if err := fieldaudit.Only(f, hh.ProtoReflect(), httpHealthCheckFields); err != nil {
			return nil, err
		}
		if hh.GetCodecClientType() != typev3.CodecClientType_HTTP1 {
			return nil, fmt.Errorf("%s.codec_client_type %s is not supported (only HTTP1)", f, hh.GetCodecClientType())
		}
		h.http, h.path, h.hostHeader = true, hh.GetPath(), hh.GetHost()
		if h.hostHeader == "" {
			h.hostHeader = c.Name // Envoy's default: the cluster's name
		}
		h.verb = http.MethodGet
		if m := hh.GetMethod(); m != corev3.RequestMethod_METHOD_UNSPECIFIED {
			if m == corev3.RequestMethod_CONNECT {
				return nil, fmt.Errorf("%s.method CONNECT is not allowed", f)
			}
			h.verb = m.String()
		}
		h.expected = hh.GetExpectedStatuses()
		for i, r := range h.expected {
			if r.GetStart() < 100 || r.GetEnd() > 600 || r.GetStart() >= r.GetEnd() {
				return nil, fmt.Errorf("%s.expected_statuses[%d] [%d, %d) is not a range of HTTP statuses", f, i, r.GetStart(), r.GetEnd())
			}
		}
	case hc.GetTcpHealthCheck() != nil:
		if err := fieldaudit.Only(field+".tcp_health_check", hc.GetTcpHealthCheck().ProtoReflect(), noFields); err != nil {
			return nil, fmt.Errorf("%w (only a connect check: no send or receive payload)", err)
		}
	default:
		return nil, fmt.Errorf("%s: only http_health_check and tcp_health_check are supported", field)
	}
	return h, nil
}

// update hands the checker the cluster's current hosts. New hosts start
// failed, until their first check passes.
func (h *healthChecker) update(s *hostSet) {
	for _, x := range s.hosts {
		if !x.hcs.seen.Load() {
			x.hcFailed.Store(true)
		}
	}
	h.hosts.Store(s)
}

// activate starts the checks once the cluster serves (a cluster built for a
// CDS response that is then refused, or still warming, checks nothing).
func (h *healthChecker) activate() {
	if h.hosts.Load() == nil {
		return
	}
	h.start.Do(func() { go h.run() })
}

// close stops the checker; a check round in progress finishes.
func (h *healthChecker) close() { h.stop.Do(func() { close(h.stopped) }) }

func (h *healthChecker) run() {
	for {
		s := h.hosts.Load()
		var wg sync.WaitGroup
		for _, x := range s.hosts {
			wg.Go(func() { h.record(x, h.check(x)) })
		}
		wg.Wait()
		wait := h.interval
		if h.c.Stats.RqTotal.Load() == 0 {
			wait = h.noTraffic
		}
		t := time.NewTimer(wait)
		select {
		case <-h.stopped:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// healthState is one host's health check counters.
type healthState struct {
	seen                atomic.Bool // checked at least once
	successes, failures uint32      // in a row; only the checker's goroutines, one per host at a time
}

func (h *healthChecker) record(x *host, err error) {
	s := &x.hcs
	h.st.attempt.Add(1)
	first := !s.seen.Swap(true)
	if err == nil {
		h.st.success.Add(1)
		s.failures = 0
		s.successes++
		if x.hcFailed.Load() && (first || s.successes >= h.healthyN) {
			x.hcFailed.Store(false)
			h.c.log.Info("health check: host healthy", "cluster", h.c.Name, "host", x.ep.Address)
		}
		return
	}
	h.st.failure.Add(1)
	s.successes = 0
	s.failures++
	if !x.hcFailed.Load() && s.failures >= h.unhealthyN {
		x.hcFailed.Store(true)
		h.c.log.Warn("health check: host unhealthy", "cluster", h.c.Name, "host", x.ep.Address, "error", err)
	}
}

// check runs one health check of x.
func (h *healthChecker) check(x *host) error {
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
	defer cancel()
	d := *h.c.dialer
	d.Timeout = h.timeout
	conn, err := d.DialContext(ctx, x.ep.Network, x.ep.Address)
	if err != nil {
		return err
	}
	defer conn.Close()
	if !h.http {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	req := h.verb + " " + h.path + " HTTP/1.1\r\nhost: " + h.hostHeader +
		"\r\nuser-agent: Envoy/HC\r\nconnection: close\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: h.verb})
	if err != nil {
		return err
	}
	resp.Body.Close()
	if !h.statusOK(resp.StatusCode) {
		return fmt.Errorf("status %s", strconv.Itoa(resp.StatusCode))
	}
	return nil
}

// statusOK applies expected_statuses; Envoy's default is 200 only.
func (h *healthChecker) statusOK(code int) bool {
	if len(h.expected) == 0 {
		return code == 200
	}
	for _, r := range h.expected {
		if int64(code) >= r.GetStart() && int64(code) < r.GetEnd() {
			return true
		}
	}
	return false
}
