package xds

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/straitmesh/strait/internal/nds"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// metrics are the server's Prometheus collectors. Names follow Istio's
// pilot_* metrics so that existing dashboards work.
type metrics struct {
	connections      prometheus.Gauge
	pushes           *prometheus.CounterVec
	pushTime         *prometheus.HistogramVec
	convergenceTime  prometheus.Histogram
	queueTime        prometheus.Histogram
	sendTime         prometheus.Histogram
	debounceTime     prometheus.Histogram
	rejects          *prometheus.CounterVec
	generateFailures *prometheus.CounterVec
	pushTriggers     *prometheus.CounterVec
}

// convergenceBuckets span a fast local push to the 10 s debounce cap.
var convergenceBuckets = []float64{.01, .1, .5, 1, 3, 5, 10, 20, 30}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pilot_xds",
			Help: "Number of endpoints connected to this pilot using XDS.",
		}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pilot_xds_pushes",
			Help: "Pilot build and send errors for lds, rds, cds and eds.",
		}, []string{"type"}),
		pushTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pilot_xds_push_time",
			Help:    "Total time in seconds Pilot takes to push lds, rds, cds and eds.",
			Buckets: []float64{.01, .1, 1, 3, 5, 10, 20, 30},
		}, []string{"type"}),
		convergenceTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pilot_proxy_convergence_time",
			Help:    "Delay in seconds between config change and a proxy receiving all required configuration.",
			Buckets: convergenceBuckets,
		}),
		queueTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pilot_proxy_queue_time",
			Help:    "Time in seconds, a proxy is in the push queue before being dequeued.",
			Buckets: []float64{.1, .5, 1, 3, 5, 10, 20, 30},
		}),
		sendTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pilot_xds_send_time",
			Help:    "Total time in seconds Pilot takes to send generated configuration.",
			Buckets: []float64{.01, .1, 1, 3, 5, 10, 20, 30},
		}),
		debounceTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pilot_debounce_time",
			Help:    "Delay in seconds between the first config enters debouncing and the merged push request is pushed into the push queue.",
			Buckets: []float64{.01, .1, 1, 3, 5, 10, 20, 30},
		}),
		rejects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pilot_total_xds_rejects",
			Help: "Total number of XDS responses from pilot rejected by proxy.",
		}, []string{"type"}),
		generateFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pilot_xds_generate_errors",
			Help: "Number of failed resource generations, by type.",
		}, []string{"type"}),
		pushTriggers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pilot_push_triggers",
			Help: "Total number of times a push was triggered, labeled by type (full or eds).",
		}, []string{"type"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{
		m.connections, m.pushes, m.pushTime, m.convergenceTime, m.queueTime,
		m.sendTime, m.debounceTime, m.rejects, m.generateFailures, m.pushTriggers,
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register xds metrics: %w", err)
		}
	}
	return m, nil
}

// typeLabel is the short metric label of a type URL: cds, eds, lds, rds, or
// the URL itself for other types.
func typeLabel(typeURL string) string {
	switch typeURL {
	case xdsapi.ClusterType:
		return "cds"
	case xdsapi.EndpointType:
		return "eds"
	case xdsapi.ListenerType:
		return "lds"
	case xdsapi.RouteType:
		return "rds"
	case nds.TypeURL:
		return "nds"
	}
	return typeURL
}
