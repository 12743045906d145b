package tlsconf_test

import (
	"net"
	"net/netip"
	"testing"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/straitmesh/strait/internal/proxy/rbac"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// TestResumedConnectionPassesRBAC: the peer identity of a resumed
// connection is what RBAC reads on a full handshake: an ALLOW policy on
// the client's principal (Istio's source.principal) admits both
// connections, and one on another principal admits neither.
func TestResumedConnectionPassesRBAC(t *testing.T) {
	full, resumed := tlsconf.ResumedServerConnsForTest(t)
	policy := func(principal string) *rbac.Engine {
		t.Helper()
		id := &rbacv3.Principal{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{
			PrincipalName: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: principal}}}}}
		e, err := rbac.Compile("rules", &rbacv3.RBAC{Action: rbacv3.RBAC_ALLOW, Policies: map[string]*rbacv3.Policy{
			"p": {Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_Any{Any: true}}}, Principals: []*rbacv3.Principal{id}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	dst := netip.MustParseAddrPort("10.0.0.9:8080")
	for _, tc := range []struct {
		principal string
		want      bool
	}{
		{tlsconf.ClientIDForTest, true},
		{"spiffe://cluster.local/ns/default/sa/other", false},
	} {
		e := policy(tc.principal)
		for name, nc := range map[string]net.Conn{"full handshake": full, "resumed": resumed} {
			in := &rbac.Input{Conn: rbac.ConnectionOf(nc, dst)}
			if got, _ := e.Evaluate(in); got != tc.want {
				t.Errorf("%s connection, ALLOW %s: allowed %v, want %v (URI SANs %v)", name, tc.principal, got, tc.want, in.Conn.URISANs)
			}
		}
	}
}
