package forward

import (
	"net"
	"net/netip"

	"github.com/straitmesh/strait/internal/proxy/cluster"
)

// Downstream is the downstream connection (peer remote, destination dst)
// that cl announces in the PROXY protocol header of its upstream
// connections, as Envoy's router passes the downstream addresses to the
// upstream_proxy_protocol socket; zero for a cluster without one, so that
// its connections stay shared.
func Downstream(cl *cluster.Cluster, remote net.Addr, dst netip.AddrPort) cluster.Downstream {
	if !cl.ProxyProtocol() {
		return cluster.Downstream{}
	}
	src, ok := remote.(*net.TCPAddr)
	if !ok {
		ap, _ := netip.ParseAddrPort(remote.String())
		return cluster.Downstream{Src: ap, Dst: dst}
	}
	return cluster.Downstream{Src: src.AddrPort(), Dst: dst}
}
