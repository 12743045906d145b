package rbac

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	v3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	netrbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	exprv1alpha1 "google.golang.org/genproto/googleapis/api/expr/v1alpha1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// TestConnectionOf reads the peer's address, and on TLS the SNI and the
// client certificate's SANs and subject.
func TestConnectionOf(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := url.Parse("spiffe://cluster.local/ns/foo/sa/client")
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "client"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		URIs: []*url.URL{id}, DNSNames: []string{"client.foo"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// The first connection is plaintext, the second TLS with a client
	// certificate, the third TLS without.
	done := make(chan *Connection, 3)
	go func() {
		for i := range 3 {
			c, err := ln.Accept()
			if err != nil {
				done <- nil
				return
			}
			defer c.Close()
			nc := c
			if i > 0 {
				tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert})
				if tc.Handshake() != nil {
					done <- nil
					return
				}
				nc = tc
			}
			done <- ConnectionOf(nc, netip.MustParseAddrPort("10.0.0.9:8080"))
		}
	}()
	plain, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	p := <-done
	tc, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{ServerName: "echo.foo", InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	s := <-done
	anon, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if a := <-done; a == nil || !a.Secure || len(a.URISANs) != 0 || a.Subject != "" {
		t.Errorf("TLS connection without a client certificate %+v", a)
	}
	local := plain.LocalAddr().(*net.TCPAddr).AddrPort()
	if p == nil || p.Source != local || p.Destination.String() != "10.0.0.9:8080" || p.Secure || p.SNI != "" || len(p.URISANs) != 0 {
		t.Errorf("plaintext connection %+v, want source %v and nothing else", p, local)
	}
	if s == nil || !s.Secure || s.SNI != "echo.foo" || len(s.URISANs) != 1 || s.URISANs[0] != id.String() ||
		len(s.DNSSANs) != 1 || s.DNSSANs[0] != "client.foo" || s.Subject != "CN=client" {
		t.Errorf("TLS connection %+v", s)
	}
}

func TestMoreMatchers(t *testing.T) {
	md := func() *Input {
		in := httpIn("GET", "/", nil)
		in.Metadata = &httpfilter.Metadata{}
		in.Metadata.Set("f", "flag", true)
		in.Metadata.Set("f", "name", "x")
		return in
	}
	value := func(v *matcherv3.ValueMatcher) *rbacv3.Principal { return idMeta("f", []string{"flag"}, v) }
	for _, tc := range []struct {
		name string
		perm *rbacv3.Permission
		id   *rbacv3.Principal
		in   *Input
		want bool
	}{
		{"port 65535", &rbacv3.Permission{Rule: &rbacv3.Permission_DestinationPort{DestinationPort: 65535}}, idAny,
			&Input{Conn: &Connection{Destination: netip.MustParseAddrPort("10.0.0.1:65535")}}, true},
		{"port range start inclusive", &rbacv3.Permission{Rule: &rbacv3.Permission_DestinationPortRange{DestinationPortRange: &typev3.Int32Range{Start: 8080, End: 8081}}}, idAny, httpIn("GET", "/", nil), true},
		{"empty port range", &rbacv3.Permission{Rule: &rbacv3.Permission_DestinationPortRange{DestinationPortRange: &typev3.Int32Range{Start: 8080, End: 8080}}}, idAny, httpIn("GET", "/", nil), false},
		{"bool_match", permAny, value(&matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_BoolMatch{BoolMatch: true}}), md(), true},
		{"bool_match false", permAny, value(&matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_BoolMatch{BoolMatch: false}}), md(), false},
		{"bool_match on a string", permAny, idMeta("f", []string{"name"}, &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_BoolMatch{BoolMatch: true}}), md(), false},
		{"string_match on a bool", permAny, value(strValue(exact("true"))), md(), false},
		{"present_match", permAny, value(&matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_PresentMatch{PresentMatch: true}}), md(), true},
		{"present_match absent", permAny, idMeta("f", []string{"nope"}, &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_PresentMatch{PresentMatch: true}}), md(), false},
		{"list_match on a string", permAny, idMeta("f", []string{"name"}, listValue(strValue(exact("x")))), md(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := mustCompile(t, rbacv3.RBAC_ALLOW, map[string]*rbacv3.Policy{"p": one(tc.perm, tc.id)})
			if ok, _ := e.Evaluate(tc.in); ok != tc.want {
				t.Errorf("allowed %v, want %v", ok, tc.want)
			}
		})
	}
}

func TestMoreRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    *rbacv3.Policy
		want string
	}{
		{"checked_condition", &rbacv3.Policy{Permissions: []*rbacv3.Permission{permAny}, Principals: []*rbacv3.Principal{idAny}, CheckedCondition: &exprv1alpha1.CheckedExpr{}}, "checked_condition"},
		{"cel_config", &rbacv3.Policy{Permissions: []*rbacv3.Permission{permAny}, Principals: []*rbacv3.Principal{idAny}, CelConfig: &corev3.CelExpressionConfig{}}, "cel_config"},
		{"port range backwards", one(&rbacv3.Permission{Rule: &rbacv3.Permission_DestinationPortRange{DestinationPortRange: &typev3.Int32Range{Start: 9, End: 8}}}, idAny), "destination_port_range"},
		{"or_match of one", one(permAny, idMeta("f", []string{"k"}, &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_OrMatch{OrMatch: &matcherv3.OrMatcher{
			ValueMatchers: []*matcherv3.ValueMatcher{strValue(exact("a"))}}}})), "or_match.value_matchers"},
		{"list_match without one_of", one(permAny, idMeta("f", []string{"k"}, &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_ListMatch{ListMatch: &matcherv3.ListMatcher{}}})), "one_of"},
		{"metadata without value", one(permAny, idMeta("f", []string{"k"}, nil)), "metadata.value"},
		{"metadata without path", one(permAny, idMeta("f", nil, strValue(exact("a")))), "metadata.path"},
		{"path without matcher", one(&rbacv3.Permission{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{}}}, idAny), "url_path.path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile("rules", &rbacv3.RBAC{Policies: map[string]*rbacv3.Policy{"p": tc.p}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Compile: %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

func TestParseNetwork(t *testing.T) {
	mk := func(c proto.Message) *anypb.Any {
		a, err := anypb.New(c)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	f, prefix, err := ParseNetwork(mk(&netrbacv3.RBAC{StatPrefix: "tcp.", Rules: &rbacv3.RBAC{Action: rbacv3.RBAC_DENY}}))
	if err != nil || prefix != "tcp." || f.rules == nil || f.rules.Action() != Deny {
		t.Fatalf("ParseNetwork: %v %q %+v", err, prefix, f)
	}
	for _, tc := range []struct {
		cfg  *netrbacv3.RBAC
		want string
	}{
		{&netrbacv3.RBAC{}, "stat_prefix"},
		{&netrbacv3.RBAC{StatPrefix: "x", Matcher: &v3.Matcher{}}, "matcher"},
		{&netrbacv3.RBAC{StatPrefix: "x", ShadowMatcher: &v3.Matcher{}}, "shadow_matcher"},
		{&netrbacv3.RBAC{StatPrefix: "x", EnforcementType: netrbacv3.RBAC_CONTINUOUS}, "enforcement_type"},
		{&netrbacv3.RBAC{StatPrefix: "x", DelayDeny: durationpb.New(time.Second)}, "delay_deny"},
		{&netrbacv3.RBAC{StatPrefix: "x", ShadowRules: &rbacv3.RBAC{Policies: map[string]*rbacv3.Policy{"p": {}}}}, "shadow_rules.policies[p]"},
	} {
		if _, _, err := ParseNetwork(mk(tc.cfg)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %q", tc.cfg, err, tc.want)
		}
	}
	if _, _, err := ParseNetwork(mk(&rbacv3.RBAC{})); err == nil {
		t.Error("a typed_config of another type was accepted")
	}
	if Allow.String() != "ALLOW" || Deny.String() != "DENY" || Log.String() != "LOG" {
		t.Error("action names")
	}
}
