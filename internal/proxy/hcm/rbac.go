package hcm

// The RBAC HTTP filters (envoy.filters.http.rbac) of an HCM run on every
// request before it is routed, in the order the HCM lists them (Istio
// lists its AUDIT, DENY and ALLOW filters in that order); the first that
// denies answers 403 "RBAC: access denied". They read the connection
// (peer certificate, addresses, SNI: computed once per connection), the
// request head and the request's dynamic metadata, which filters before
// them (the JWT filter) fill.

import (
	"net"
	"net/netip"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/rbac"
	"github.com/straitmesh/strait/internal/proxy/route"
)

// authorize runs the RBAC filters for req on a connection described by
// conn, from the downstream remote address remote (xff.go; invalid: the
// peer's); false when one of them denies.
func (hf *httpFilters) authorize(conn *rbac.Connection, req *route.Request, remote netip.Addr, md *httpfilter.Metadata) bool {
	in := rbac.Input{Conn: conn, Request: req, RemoteIP: remote, Metadata: md}
	for _, f := range hf.rbac {
		if !f.Check(&in) {
			return false
		}
	}
	return true
}

// rbacConnection describes the downstream connection c for the RBAC
// filters (rbac.ConnectionOf looks through the HCM's own wrappers to the
// *tls.Conn the listener handed over); nil when f has no RBAC filter.
func rbacConnection(f *Filter, c net.Conn, dst netip.AddrPort) *rbac.Connection {
	if len(f.filters.rbac) == 0 {
		return nil
	}
	return rbac.ConnectionOf(c, dst)
}

// streamAuthorize is authorize for the HTTP/2 and net/http paths. rr is
// taken by value, so that a request on an HCM without RBAC filters (which
// does not call it) does not make it escape; remote is the downstream
// remote address (xff.go); md is the request's dynamic
// metadata (nil when no filter wrote any).
func streamAuthorize(c *conn, rr route.Request, remote netip.Addr, md *httpfilter.Metadata) bool {
	return c.filter.filters.authorize(c.authz, &rr, remote, md)
}
