package listener

import (
	"net"
	"net/netip"
	"time"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/rbac"
	"github.com/straitmesh/strait/internal/proxy/tcpproxy"
)

func localAddrPort(c net.Conn) netip.AddrPort {
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
		ap := a.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

// handle runs one accepted connection on listener l.
func (m *Manager) handle(l *Listener, c net.Conn) {
	l.stats.CxTotal.Add(1)
	dst := localAddrPort(c)
	if l.UseOriginalDst || l.OriginalDst {
		if od, err := m.opts.OriginalDst(c); err == nil && od.IsValid() {
			dst = netip.AddrPortFrom(od.Addr().Unmap(), od.Port())
		}
	}
	// original_src is a listener filter of the accepting listener: like
	// the destination, it stays with the connection after a handoff.
	var src cluster.OriginalSource
	if l.OriginalSrc != nil {
		src = originalSource(c, l.OriginalSrc)
	}
	target := l
	if l.UseOriginalDst {
		if t := m.handoffTarget(l, dst); t != nil {
			target = t
			target.stats.CxTotal.Add(1)
		}
	}
	m.serve(target, c, dst, src)
}

// originalSource is the source of the upstream connections made for c:
// its peer's IP (the port is left to the kernel, as in Envoy).
func originalSource(c net.Conn, f *OriginalSrc) cluster.OriginalSource {
	a, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return cluster.OriginalSource{} // not IP: nothing to preserve
	}
	return cluster.OriginalSource{Addr: a.AddrPort().Addr().Unmap(), Mark: f.Mark}
}

// peerAddr is c's remote IP, the source that source_prefix_ranges match
// (invalid when c is not a TCP connection: then only chains without
// source ranges match).
func peerAddr(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr()
	}
	return netip.Addr{}
}

// handoffTarget finds the listener that owns a redirected connection's
// original destination: the listener with exactly that IP:port, else the
// wildcard listener on that port, else none (the accepting listener serves
// it with its own filter chains).
func (m *Manager) handoffTarget(self *Listener, dst netip.AddrPort) *Listener {
	s := m.active.Load()
	if t := s.byAddr[dst]; t != nil && t != self {
		return t
	}
	wild := netip.IPv4Unspecified()
	if dst.Addr().Is6() {
		wild = netip.IPv6Unspecified()
	}
	if t := s.byAddr[netip.AddrPortFrom(wild, dst.Port())]; t != nil && t != self {
		return t
	}
	return nil
}

// serve runs c on l's matching filter chain. src, when valid, is the
// original source its upstream connections must use.
func (m *Manager) serve(l *Listener, c net.Conn, dst netip.AddrPort, src cluster.OriginalSource) {
	start := time.Now()
	var in inspection
	if l.TLSInspector {
		var ok bool
		c, in, ok = inspectTLS(c, l.FiltersTimeout, l.ContinueOnTimeout)
		if !ok {
			m.log.Debug("listener filters timed out; closing", "listener", l.Name, "destination", dst.String())
			c.Close()
			return
		}
	}
	fc := l.match(dst, peerAddr(c), in)
	if fc == nil {
		m.log.Debug("no filter chain matched; closing", "listener", l.Name, "destination", dst.String())
		c.Close()
		return
	}
	if fc.tls != nil {
		tc, ok := m.terminateTLS(l, fc, c)
		if !ok {
			return
		}
		c = tc
	}
	if len(fc.rbac) > 0 {
		if ok, details := authorizeConn(fc, c, dst); !ok {
			m.log.Debug("connection denied by rbac", "listener", l.Name, "peer", c.RemoteAddr().String(), "destination", dst.String())
			if fc.tcp != nil {
				fc.tcp.LogDenied(c, dst, start, details) // its access log has the line Envoy's tcp_proxy writes
			}
			c.Close()
			return
		}
	}
	l.stats.CxActive.Add(1)
	if fc.http != nil {
		// The HTTP server owns c from here; active count is approximate for HTTP.
		l.stats.CxActive.Add(-1)
		m.opts.HTTP.ServeConnDrain(m.exchangeHTTP(fc, c), fc.http, dst, src, fc.drain) // istio.go
		return
	}
	defer l.stats.CxActive.Add(-1)
	// A TCP stream has no way to be asked to end: it goes on until its
	// chain's drain ends (the drain time after its listener version was
	// replaced or removed, or its chain dropped), and is closed then.
	fc.tcp.ServeDrain(m.ctx, c, dst, src, m.opts.Clusters, m.log, tcpproxy.Drain{Started: fc.drain.EndContext()})
}

// defaultDrainTime is Envoy's --drain-time-s default.
const defaultDrainTime = 600 * time.Second

func (m *Manager) drainTime() time.Duration {
	if m.opts.DrainTime > 0 {
		return m.opts.DrainTime
	}
	return defaultDrainTime
}

// authorizeConn runs the chain's network RBAC filters on c (after its TLS
// handshake, so the peer certificate is known); false when one denies,
// and the connection is then closed without reaching the terminal filter.
// details are then Envoy's termination details
// ("rbac_access_denied_matched_policy[<policy>|none]").
func authorizeConn(fc *filterChain, c net.Conn, dst netip.AddrPort) (ok bool, details string) {
	return authorizeConnection(fc, rbac.ConnectionOf(c, dst))
}

func authorizeConnection(fc *filterChain, conn *rbac.Connection) (ok bool, details string) {
	in := rbac.Input{Conn: conn}
	for _, f := range fc.rbac {
		if ok, id := f.CheckPolicy(&in); !ok {
			if id == "" {
				id = "none"
			}
			return false, "rbac_access_denied_matched_policy[" + id + "]"
		}
	}
	return true, ""
}
