package hcm

// The downstream connection as the HTTP filters see it, computed once per
// connection (HTTP/2: when it is accepted; HTTP/1.1: at the first request
// that asks, h1stream.go).

import (
	"net"
	"net/netip"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/rbac"
)

// rbacConnection describes the downstream connection c for the RBAC
// filter (rbac.ConnectionOf looks through the HCM's own wrappers to the
// *tls.Conn the listener handed over); nil when f has no filter.
func rbacConnection(f *Filter, c net.Conn, dst netip.AddrPort) *rbac.Connection {
	if f.chain == nil || len(f.chain.filters) == 0 {
		return nil
	}
	return rbac.ConnectionOf(c, dst)
}

// filterConnection is connectionOf (chain.go) when f has a filter.
func filterConnection(f *Filter, c net.Conn, dst netip.AddrPort) *httpfilter.Connection {
	if f.chain == nil || len(f.chain.filters) == 0 {
		return nil
	}
	return connectionOf(c, dst)
}
