package tcpproxy

// What Istio's network filters add to a tcp_proxy chain: the metadata
// exchange (peermeta/exchange.go) and istio.stats' istio_tcp_* metrics, labeled
// with the peer the exchange told.

import (
	"crypto/x509"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/straitmesh/strait/internal/proxy/istiometrics"
	"github.com/straitmesh/strait/internal/proxy/peermeta"
	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// Istio configures Istio's additions to a tcp_proxy. The listener sets it;
// immutable once set.
type Istio struct {
	// Frame is our exchange frame (the node's id and workload), sent on
	// an exchange either way: downstream when Exchange is set, upstream
	// when the cluster lists istio.metadata_exchange.
	Frame []byte
	// Exchange: the chain lists the istio.metadata_exchange network
	// filter, so a downstream connection that negotiated ALPN
	// istio-peer-exchange starts with the peer's frame.
	Exchange bool
	// Stats are the istio_tcp_* families when the chain lists istio.stats
	// (nil: none); Reporter and Local label them, and the byte counters
	// of a live connection are reported every ReportEvery
	// (tcp_reporting_duration; 0: only when it closes).
	Stats       *istiometrics.TCP
	Reporter    istiometrics.Reporter
	Local       peermeta.Workload
	ReportEvery time.Duration
}

// DefaultReportEvery is istio.stats' tcp_reporting_duration default
// (15 s, stats.PluginConfig).
const DefaultReportEvery = 15 * time.Second

// tcpReport is the istio_tcp_* accounting of one connection. The byte
// counts are atomics written by the copying goroutines; mu guards the
// rest, shared by the exchange's callback, the periodic reporter and the
// final report.
type tcpReport struct {
	istio *Istio

	received, sent atomic.Int64 // application bytes downstream→upstream, upstream→downstream

	mu           sync.Mutex
	exchange     istiometrics.Exchange
	resolved     bool // the peer is known (or known to be unknown)
	opened       bool
	reportedRecv int64
	reportedSent int64
}

func newTCPReport(is *Istio, cluster string, down net.Conn) *tcpReport {
	r := &tcpReport{istio: is}
	e := &r.exchange
	e.Reporter, e.Local, e.Protocol, e.GRPCStatus = is.Reporter, is.Local, "tcp", -1
	if svc, ok := istiometrics.ServiceFromCluster(cluster); ok {
		e.Service = svc
	}
	if tc, ok := down.(peermeta.TLSConn); ok && is.Reporter == istiometrics.Destination {
		// The destination knows both identities of an mTLS connection:
		// the client's certificate and the one it presented.
		if st := tc.ConnectionState(); len(st.PeerCertificates) > 0 {
			e.MTLS = true
			e.PeerPrincipal = firstURI(st.PeerCertificates[0])
			e.LocalPrincipal = firstURI(tlsconf.LocalCertificate(down))
		}
	}
	return r
}

// setService makes svc, the cluster's istio.services metadata, the
// connection's destination service (before any report).
func (r *tcpReport) setService(svc istiometrics.Service) {
	r.mu.Lock()
	r.exchange.Service = svc
	r.mu.Unlock()
}

// peer records what the exchange told (w nil: nothing).
func (r *tcpReport) peer(_ string, w *peermeta.Workload) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w != nil {
		r.exchange.Peer = *w
	}
	r.resolved = true
}

func (r *tcpReport) setPrincipals(peer, local string) {
	r.mu.Lock()
	r.exchange.PeerPrincipal, r.exchange.LocalPrincipal = peer, local
	r.mu.Unlock()
}

// resolve marks the peer as settled without an exchange.
func (r *tcpReport) resolve() { r.peer("", nil) }

// flush adds the bytes moved since the last flush to the counters (and
// counts the connection opened on the first); closed also counts it
// closed. A periodic flush waits for the peer to be settled, so that all
// of a connection's series carry the same labels.
func (r *tcpReport) flush(closed bool, flags string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.resolved && !closed {
		return
	}
	if flags != "" {
		r.exchange.Flags = flags
	}
	var buf [32]string
	values := istiometrics.AppendTCP(buf[:0], &r.exchange)
	m := r.istio.Stats
	// A metric the Telemetry API dropped is nil (istiometrics.NewTCP).
	add := func(v *stats.Vec, n uint64) {
		if v != nil && n > 0 {
			v.With(values).Add(n)
		}
	}
	if !r.opened {
		add(m.Opened, 1)
		r.opened = true
	}
	recv, sent := r.received.Load(), r.sent.Load()
	if d := recv - r.reportedRecv; d > 0 {
		add(m.Received, uint64(d))
	}
	if d := sent - r.reportedSent; d > 0 {
		add(m.Sent, uint64(d))
	}
	r.reportedRecv, r.reportedSent = recv, sent
	if closed {
		add(m.Closed, 1)
	}
}

// every flushes every d until stop is closed.
func (r *tcpReport) every(d time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			r.flush(false, "")
		}
	}
}

// firstURI is a certificate's first URI SAN (its SPIFFE identity), ""
// when it has none.
func firstURI(c *x509.Certificate) string {
	if c == nil || len(c.URIs) == 0 {
		return ""
	}
	return c.URIs[0].String()
}

// countingConn counts the bytes read from a connection into n.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.n.Add(int64(k))
	return k, err
}

func (c countingConn) CloseWrite() error {
	if cw, ok := c.Conn.(closeWriter); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// istioConns wraps the two connections for the exchange and the byte
// counts: the downstream one when this chain runs the exchange and the
// client negotiated it, the upstream one's peer (the cluster started its
// exchange, cluster/filters.go) reported to report. A connection without
// an exchange has its peer settled at once: unknown.
func (f *Filter) istioConns(down, up net.Conn, report *tcpReport) (net.Conn, net.Conn) {
	is := f.Istio
	if is == nil {
		return down, up
	}
	var onPeer func(string, *peermeta.Workload)
	if report != nil {
		onPeer = report.peer
	}
	exchanging := false
	if is.Exchange && peermeta.NegotiatedALPN(down) == peermeta.ALPN {
		x := peermeta.NewConn(down, is.Frame)
		x.OnPeer(onPeer)
		down, exchanging = x, true
	}
	if x, ok := up.(*peermeta.Conn); ok {
		x.OnPeer(onPeer)
		exchanging = true
	}
	if report == nil {
		return down, up
	}
	if is.Reporter == istiometrics.Source {
		// The source knows the server's identity from its certificate,
		// its own from the one it presented.
		report.setPrincipals(tlsconf.UpstreamPrincipals(up))
	}
	if !exchanging {
		report.resolve()
	}
	return countingConn{down, &report.received}, countingConn{up, &report.sent}
}

// NetConn returns the wrapped connection (tlsconf.Layers).
func (c countingConn) NetConn() net.Conn { return c.Conn }
