package server

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/straitmesh/strait/internal/ca"
)

// metrics are Istio's citadel_server_* series
// (security/pkg/server/ca/monitoring.go), owned by one Server.
type metrics struct {
	csr          prometheus.Counter
	authnFailure prometheus.Counter
	signError    *prometheus.CounterVec
	success      prometheus.Counter
	gauges       []prometheus.Collector
}

func newMetrics(c *ca.CA) metrics {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	return metrics{
		csr: prometheus.NewCounter(prometheus.CounterOpts{Name: "citadel_server_csr_count",
			Help: "The number of CSRs received by Citadel server."}),
		authnFailure: prometheus.NewCounter(prometheus.CounterOpts{Name: "citadel_server_authentication_failure_count",
			Help: "The number of authentication failures."}),
		signError: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "citadel_server_csr_sign_err_count",
			Help: "The number of errors occurred when signing the CSR."}, []string{"error"}),
		success: prometheus.NewCounter(prometheus.CounterOpts{Name: "citadel_server_success_cert_issuance_count",
			Help: "The number of certificates issuances that have succeeded."}),
		gauges: []prometheus.Collector{
			gauge("citadel_server_root_cert_expiry_timestamp", "The unix timestamp, in seconds, when the root cert will expire.",
				func() float64 { return float64(c.RootExpiry().Unix()) }),
			gauge("citadel_server_root_cert_expiry_seconds", "The time remaining, in seconds, before the root cert will expire. A negative value indicates the cert is expired.",
				func() float64 { return time.Until(c.RootExpiry()).Seconds() }),
			gauge("citadel_server_cert_chain_expiry_timestamp", "The unix timestamp, in seconds, when the CA's signing certificate will expire.",
				func() float64 { return float64(c.CertChainExpiry().Unix()) }),
			gauge("citadel_server_cert_chain_expiry_seconds", "The time remaining, in seconds, before the CA's signing certificate will expire. A negative value indicates the cert is expired.",
				func() float64 { return time.Until(c.CertChainExpiry()).Seconds() }),
		},
	}
}

func (m metrics) register(r prometheus.Registerer) error {
	cs := append([]prometheus.Collector{m.csr, m.authnFailure, m.signError, m.success}, m.gauges...)
	var errs []error
	for _, c := range cs {
		errs = append(errs, r.Register(c))
	}
	return errors.Join(errs...)
}
