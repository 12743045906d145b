package xdsproxy

import (
	"fmt"
	"io"
	"sync/atomic"
)

// metrics are the relay's counters, exported in Prometheus text format
// beside the proxy's own stats on the agent's :15020/stats/prometheus.
type metrics struct {
	downstreamActive   atomic.Int64
	downstreamTotal    atomic.Int64
	upstreamConnects   atomic.Int64
	upstreamFailures   atomic.Int64
	requestsForwarded  atomic.Int64
	responsesForwarded atomic.Int64
	nacks              atomic.Int64
}

// WriteMetrics writes the relay's metrics in Prometheus text format.
func (p *Proxy) WriteMetrics(w io.Writer) error {
	m := &p.metrics
	cds, lds := p.Synced()
	for _, s := range []struct {
		name, kind, help string
		v                int64
	}{
		{"strait_agent_xds_downstream_streams", "gauge", "ADS streams from the proxy currently open.", m.downstreamActive.Load()},
		{"strait_agent_xds_downstream_streams_total", "counter", "ADS streams opened by the proxy.", m.downstreamTotal.Load()},
		{"strait_agent_xds_upstream_connects_total", "counter", "ADS streams opened to the control plane.", m.upstreamConnects.Load()},
		{"strait_agent_xds_upstream_failures_total", "counter", "ADS streams to the control plane that failed or broke.", m.upstreamFailures.Load()},
		{"strait_agent_xds_requests_total", "counter", "Discovery requests forwarded to the control plane (replays included).", m.requestsForwarded.Load()},
		{"strait_agent_xds_responses_total", "counter", "Discovery responses forwarded to the proxy.", m.responsesForwarded.Load()},
		{"strait_agent_xds_nacks_total", "counter", "Discovery requests from the proxy that carried error_detail.", m.nacks.Load()},
		{"strait_agent_xds_cds_acked", "gauge", "1 once the proxy has ACKed CDS.", b2i(cds)},
		{"strait_agent_xds_lds_acked", "gauge", "1 once the proxy has ACKed LDS.", b2i(lds)},
	} {
		if _, err := fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", s.name, s.help, s.name, s.kind, s.name, s.v); err != nil {
			return err
		}
	}
	return nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
