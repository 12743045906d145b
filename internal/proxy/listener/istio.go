package listener

// Istio's network filters on a filter chain: istio.metadata_exchange
// (the TCP metadata exchange, inbound chains) and istio.stats (the
// istio_tcp_* metrics of a tcp_proxy chain). Both come before the terminal
// filter; what they do happens in tcpproxy (istio.go) and, for the
// exchange on an HTTP chain, on the connection handed to the HCM.

import (
	"fmt"
	"net"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/straitmesh/strait/internal/proxy/filters/http/istiostats"
	"github.com/straitmesh/strait/internal/proxy/istiometrics"
	"github.com/straitmesh/strait/internal/proxy/peermeta"
	"github.com/straitmesh/strait/internal/proxy/tcpproxy"
)

// Local is the proxy's own identity as Istio's filters use it, made once
// from the bootstrap node.
type Local struct {
	// Node is the bootstrap node (nil: none), for the HCM's filters.
	Node     *corev3.Node
	Workload peermeta.Workload
	// Frame is the node's exchange frame (peermeta.AppendExchange).
	Frame []byte
}

// NewLocal reads the local workload and its exchange frame from node; a
// node without metadata (or none) tells its peers an unknown workload, as
// Envoy with an empty node does.
func NewLocal(node *corev3.Node) (Local, error) {
	w := peermeta.FromStruct(node.GetMetadata())
	frame, err := peermeta.AppendExchange(nil, node.GetId(), w)
	if err != nil {
		return Local{}, err
	}
	return Local{Node: node, Workload: w, Frame: frame}, nil
}

// istioChain is what Istio's network filters ask of a chain.
type istioChain struct {
	exchange bool
	stats    *istiometrics.TCP
	every    time.Duration // tcp_reporting_duration
	seen     bool
}

// add records one of Istio's network filters; known is false
// for another filter.
func (ic *istioChain) add(f *listenerv3.Filter, d Deps) (known bool, err error) {
	switch f.GetName() {
	case peermeta.FilterName:
		if err := peermeta.ParseNetworkConfig(f.GetTypedConfig()); err != nil {
			return true, err
		}
		ic.exchange, ic.seen = true, true
	case istiostats.Name:
		c, err := istiostats.Parse(f.GetTypedConfig())
		if err != nil {
			return true, err
		}
		m, err := istiometrics.NewTCP(d.Stats, istiostats.Dropped(c)...)
		if err != nil {
			return true, err
		}
		ic.stats, ic.seen = m, true
		ic.every = tcpproxy.DefaultReportEvery
		if t := c.GetTcpReportingDuration(); t != nil {
			if err := t.CheckValid(); err != nil || t.AsDuration() <= 0 {
				return true, fmt.Errorf("%s: tcp_reporting_duration %v is not a positive duration", istiostats.Name, t.AsDuration())
			}
			ic.every = t.AsDuration()
		}
	default:
		return false, nil
	}
	return true, nil
}

// apply gives the tcp_proxy of the chain what the filters ask.
func (ic *istioChain) apply(t *tcpproxy.Filter, d Deps) {
	if !ic.seen {
		return
	}
	reporter := istiometrics.Destination
	if d.direction == corev3.TrafficDirection_OUTBOUND {
		reporter = istiometrics.Source
	}
	frame := d.Local.Frame
	if frame == nil {
		frame = peermeta.UnknownFrame()
	}
	t.Istio = &tcpproxy.Istio{
		Frame: frame, Exchange: ic.exchange,
		Stats: ic.stats, Reporter: reporter, Local: d.Local.Workload,
		ReportEvery: ic.every,
	}
}

// localFrame is the node's exchange frame, or an unknown workload's.
func (m *Manager) localFrame() []byte {
	if m.opts.Local.Frame == nil {
		return peermeta.UnknownFrame()
	}
	return m.opts.Local.Frame
}

// exchangeHTTP runs the server side of the exchange on a connection an
// HTTP chain listing istio.metadata_exchange serves, when the client
// negotiated it (Istio's HTTP chains do not offer the ALPN, so this is
// rare): the peer's frame is taken off before the HCM reads.
func (m *Manager) exchangeHTTP(fc *filterChain, c net.Conn) net.Conn {
	if !fc.istio.exchange || peermeta.NegotiatedALPN(c) != peermeta.ALPN {
		return c
	}
	return peermeta.NewConn(c, m.localFrame())
}
