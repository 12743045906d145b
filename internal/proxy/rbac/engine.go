// Package rbac is Envoy's role-based access control engine
// (envoy.config.rbac.v3): policies of permissions (what is asked) and
// principals (who asks), evaluated for a connection or an HTTP request. The
// HTTP filter (package filters/http/rbac) and the network filter (filter.go)
// share it; it reads and writes a request's dynamic metadata through its
// own Metadata interface (httpfilter.Metadata is one), so the engine does
// not depend on the HTTP filter interface. Every field it does not implement is refused by name when the
// config is compiled, so a control plane learns from the NACK what it asked
// for in vain.
package rbac

import (
	"fmt"
	"net"
	"net/netip"
	"sort"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"

	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// Action is what an engine does with a match.
type Action int

const (
	// Allow lets a request through only when a policy matches.
	Allow Action = iota
	// Deny refuses a request when a policy matches.
	Deny
	// Log lets every request through; a match is only recorded.
	Log
)

func (a Action) String() string {
	switch a {
	case Deny:
		return "DENY"
	case Log:
		return "LOG"
	}
	return "ALLOW"
}

// Connection is what the engine knows of a downstream connection. It is
// computed once per connection (ConnectionOf) and read-only after.
type Connection struct {
	// Source is the peer's address (direct_remote_ip, source_ip).
	Source netip.AddrPort
	// Destination is the connection's (original) destination.
	Destination netip.AddrPort
	// SNI is the server name the client asked for in its TLS ClientHello.
	SNI string
	// Secure is set when the connection is TLS terminated here.
	Secure bool
	// The peer certificate's URI and DNS SANs and subject (empty when the
	// peer sent none).
	URISANs, DNSSANs []string
	Subject          string
}

// ConnectionOf describes c, whose destination is dst. The TLS connection
// the proxy terminated under c (tlsconf.Terminated, after its handshake)
// gives the peer certificate and SNI.
func ConnectionOf(c net.Conn, dst netip.AddrPort) *Connection {
	out := &Connection{Destination: dst}
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		ap := a.AddrPort()
		out.Source = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	if tc := tlsconf.Terminated(c); tc != nil {
		st := tc.ConnectionState()
		out.Secure = true
		out.SNI = st.ServerName
		if len(st.PeerCertificates) > 0 {
			leaf := st.PeerCertificates[0]
			for _, u := range leaf.URIs {
				out.URISANs = append(out.URISANs, u.String())
			}
			out.DNSSANs = leaf.DNSNames
			out.Subject = leaf.Subject.String()
		}
	}
	return out
}

// Input is what one evaluation looks at.
type Input struct {
	Conn *Connection
	// Request is the HTTP request (headers, pseudo-headers and path); nil
	// for a connection (the network filter), where header and path
	// matchers never match, as in Envoy's network filter, whose request
	// headers are empty.
	Request *route.Request
	// RemoteIP is the original client's address (remote_ip): the HCM's
	// downstream remote address, from x-forwarded-for or the peer by its
	// use_remote_address and xff_num_trusted_hops. Zero means Conn.Source.
	RemoteIP netip.Addr
	// Metadata is the request's dynamic metadata (the JWT filter's
	// verified claims); nil reads as empty.
	Metadata Metadata
}

// Metadata is a request's dynamic metadata as RBAC reads it (its metadata
// matchers) and writes it (a shadow engine's result); the HTTP filters'
// httpfilter.Metadata is one.
type Metadata interface {
	Get(namespace, key string) (any, bool)
	Set(namespace, key string, value any)
}

func (in *Input) remoteIP() netip.Addr {
	if in.RemoteIP.IsValid() {
		return in.RemoteIP
	}
	return in.Conn.Source.Addr()
}

// Engine is one compiled envoy.config.rbac.v3.RBAC. Immutable.
type Engine struct {
	action   Action
	policies []policy // by name, so that the matched policy is deterministic
}

type policy struct {
	name        string
	permissions []permission // any one
	principals  []principal  // any one
}

// Compile compiles an RBAC config; field prefixes errors ("rules").
func Compile(field string, r *rbacv3.RBAC) (*Engine, error) {
	e := &Engine{}
	switch r.GetAction() {
	case rbacv3.RBAC_ALLOW:
		e.action = Allow
	case rbacv3.RBAC_DENY:
		e.action = Deny
	case rbacv3.RBAC_LOG:
		e.action = Log
	default:
		return nil, fmt.Errorf("%s.action %v is not supported (want ALLOW, DENY or LOG)", field, r.GetAction())
	}
	if r.GetAuditLoggingOptions() != nil {
		return nil, fmt.Errorf("%s.audit_logging_options is not supported (remove it)", field)
	}
	names := make([]string, 0, len(r.GetPolicies()))
	for n := range r.GetPolicies() {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := r.GetPolicies()[n]
		pf := fmt.Sprintf("%s.policies[%s]", field, n)
		switch {
		case p.GetCondition() != nil:
			return nil, fmt.Errorf("%s.condition is not supported (CEL conditions are not implemented)", pf)
		case p.GetCheckedCondition() != nil:
			return nil, fmt.Errorf("%s.checked_condition is not supported (CEL conditions are not implemented)", pf)
		case p.GetCelConfig() != nil:
			return nil, fmt.Errorf("%s.cel_config is not supported (CEL conditions are not implemented)", pf)
		case len(p.GetPermissions()) == 0:
			return nil, fmt.Errorf("%s.permissions must have at least one entry", pf)
		case len(p.GetPrincipals()) == 0:
			return nil, fmt.Errorf("%s.principals must have at least one entry", pf)
		}
		cp := policy{name: n}
		for i, pm := range p.GetPermissions() {
			c, err := compilePermission(fmt.Sprintf("%s.permissions[%d]", pf, i), pm)
			if err != nil {
				return nil, err
			}
			cp.permissions = append(cp.permissions, c)
		}
		for i, pr := range p.GetPrincipals() {
			c, err := compilePrincipal(fmt.Sprintf("%s.principals[%d]", pf, i), pr)
			if err != nil {
				return nil, err
			}
			cp.principals = append(cp.principals, c)
		}
		e.policies = append(e.policies, cp)
	}
	return e, nil
}

// Action is the engine's action.
func (e *Engine) Action() Action { return e.action }

// Evaluate decides for in: allowed, and the name of the policy that
// matched ("" when none), as Envoy's RoleBasedAccessControlEngineImpl
// does: ALLOW allows when a policy matches, DENY denies when one matches,
// LOG always allows.
func (e *Engine) Evaluate(in *Input) (allowed bool, policyID string) {
	matched := ""
	for i := range e.policies {
		if e.policies[i].matches(in) {
			matched = e.policies[i].name
			break
		}
	}
	switch e.action {
	case Allow:
		return matched != "", matched
	case Deny:
		return matched == "", matched
	}
	return true, matched
}

func (p *policy) matches(in *Input) bool {
	ok := false
	for _, pm := range p.permissions {
		if pm(in) {
			ok = true
			break
		}
	}
	if !ok {
		return false
	}
	for _, pr := range p.principals {
		if pr(in) {
			return true
		}
	}
	return false
}
