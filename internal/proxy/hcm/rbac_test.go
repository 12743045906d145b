package hcm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	xdsmatcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	exprv1alpha1 "google.golang.org/genproto/googleapis/api/expr/v1alpha1"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/rbac"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

func rbacFilter(t testing.TB, cfg *rbachttpv3.RBAC) *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: "envoy.filters.http.rbac", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAnyT(t, cfg)}}
}

func withRBAC(filters ...*hcmv3.HttpFilter) func(*hcmv3.HttpConnectionManager) {
	return func(h *hcmv3.HttpConnectionManager) { h.HttpFilters = append(filters, h.HttpFilters...) }
}

func rbacPathPrefix(p string) *rbacv3.Permission {
	return &rbacv3.Permission{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{Rule: &matcherv3.PathMatcher_Path{Path: &matcherv3.StringMatcher{
		MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: p}}}}}}
}

var (
	rbacAnyPerm = &rbacv3.Permission{Rule: &rbacv3.Permission_Any{Any: true}}
	rbacAnyID   = &rbacv3.Principal{Identifier: &rbacv3.Principal_Any{Any: true}}
)

// TestRBACFilter runs a DENY filter then an ALLOW filter, as Istio lists
// them, on every request path: a denied request gets 403 "RBAC: access
// denied" and never reaches the backend.
func TestRBACFilter(t *testing.T) {
	be := newRecorder(t)
	beAddr := strings.TrimPrefix(be.URL, "http://")
	deny := rbacFilter(t, &rbachttpv3.RBAC{Rules: &rbacv3.RBAC{Action: rbacv3.RBAC_DENY, Policies: map[string]*rbacv3.Policy{
		"admin": {Permissions: []*rbacv3.Permission{rbacPathPrefix("/admin")}, Principals: []*rbacv3.Principal{rbacAnyID}},
	}}})
	allow := rbacFilter(t, &rbachttpv3.RBAC{Rules: &rbacv3.RBAC{Action: rbacv3.RBAC_ALLOW, Policies: map[string]*rbacv3.Policy{
		"users": {Permissions: []*rbacv3.Permission{rbacAnyPerm}, Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Header{
			Header: &routev3.HeaderMatcher{Name: "x-user", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}}}}},
		"public": {Permissions: []*rbacv3.Permission{rbacPathPrefix("/public")}, Principals: []*rbacv3.Principal{rbacAnyID}},
		"forwarded": {Permissions: []*rbacv3.Permission{rbacAnyPerm}, Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_RemoteIp{
			RemoteIp: &corev3.CidrRange{AddressPrefix: "203.0.113.0", PrefixLen: wrapperspb.UInt32(24)}}}}},
	}}})
	denied := func(t *testing.T, resp *http.Response, body string) {
		t.Helper()
		if resp.StatusCode != 403 || body != "RBAC: access denied" || resp.Header.Get("X-Strait-Response-Flags") != "RBAC" {
			t.Errorf("got %d %q flags %q, want 403 \"RBAC: access denied\" RBAC", resp.StatusCode, body, resp.Header.Get("X-Strait-Response-Flags"))
		}
	}
	cases := []filterCase{
		{name: "allowed by header", path: "/x", header: map[string]string{"x-user": "a"}, check: wantUpstream},
		{name: "denied path beats allow", path: "/admin/x", header: map[string]string{"x-user": "a"}, check: denied},
		{name: "no allow policy matches", path: "/x", check: denied},
		{name: "allowed by path", path: "/public/p", check: wantUpstream},
		{name: "allowed by forwarded client", path: "/y", header: map[string]string{"x-forwarded-for": "198.51.100.1, 203.0.113.9"}, check: wantUpstream},
		{name: "forwarded client not last", path: "/y", header: map[string]string{"x-forwarded-for": "203.0.113.9, 198.51.100.1"}, check: denied},
	}
	for _, codec := range codecs {
		addr, st := startH2ProxyStats(t, codec, []*routev3.Route{prefixRoute("/", "be")}, withRBAC(deny, allow), staticCluster("be", beAddr))
		for _, cl := range []struct {
			name string
			c    *http.Client
		}{{"http1", &http.Client{Timeout: 10 * time.Second}}, {"h2c", h2cClient()}} {
			for _, tc := range cases {
				t.Run(string(codec)+"/"+cl.name+"/"+tc.name, func(t *testing.T) {
					req, err := http.NewRequest("GET", "http://"+addr+tc.path, nil)
					if err != nil {
						t.Fatal(err)
					}
					for k, v := range tc.header {
						req.Header.Set(k, v)
					}
					resp, err := cl.c.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					tc.check(t, resp, string(b))
				})
			}
		}
		// Per client, the DENY filter saw the 6 requests and denied one;
		// the ALLOW filter saw the other 5 and denied 2. The two filters
		// of one HCM share their counters, as in Envoy.
		n := uint64(2)
		if a, d := st.Counter("http.test.rbac.allowed").Load(), st.Counter("http.test.rbac.denied").Load(); a != 8*n || d != 3*n {
			t.Errorf("%s: rbac.allowed %d rbac.denied %d, want %d and %d", codec, a, d, 8*n, 3*n)
		}
	}
	if n := be.count("/admin/x"); n != 0 {
		t.Errorf("the backend saw %d denied requests", n)
	}
}

// TestRBACFilterPeerCertificate: on a TLS connection the authenticated
// principal is the client certificate's URI SAN.
func TestRBACFilterPeerCertificate(t *testing.T) {
	be := newRecorder(t)
	beAddr := strings.TrimPrefix(be.URL, "http://")
	serverCfg, clientCfg := mutualTLS(t, "spiffe://cluster.local/ns/foo/sa/client")
	for _, tc := range []struct {
		name, principal string
		want            int
	}{
		{"same identity", "spiffe://cluster.local/ns/foo/sa/client", 200},
		{"other service account", "spiffe://cluster.local/ns/foo/sa/other", 403},
	} {
		allow := rbacFilter(t, &rbachttpv3.RBAC{Rules: &rbacv3.RBAC{Action: rbacv3.RBAC_ALLOW, Policies: map[string]*rbacv3.Policy{
			"p": {Permissions: []*rbacv3.Permission{rbacAnyPerm}, Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Authenticated_{
				Authenticated: &rbacv3.Principal_Authenticated{PrincipalName: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: tc.principal}}}}}}},
		}}})
		for _, codec := range codecs {
			t.Run(tc.name+"/"+string(codec), func(t *testing.T) {
				addr := startTLSProxy(t, codec, serverCfg, withRBAC(allow), staticCluster("be", beAddr))
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: clientCfg}}
				resp, err := c.Get("https://" + addr + "/")
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.want {
					t.Errorf("status %d %q, want %d", resp.StatusCode, b, tc.want)
				}
			})
		}
	}
}

// startTLSProxy is startH2ProxyStats behind a TLS listener, handing the
// HCM the *tls.Conn as strait-proxy's listener does.
func startTLSProxy(t *testing.T, codec Codec, cfg *tls.Config, mod func(*hcmv3.HttpConnectionManager), clusters ...*clusterv3.Cluster) string {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	cm := cluster.NewManager(log, stats.New())
	if err := cm.AddStatic(clusters); err != nil {
		t.Fatal(err)
	}
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: "test",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{prefixRoute("/", "be")}}}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: routerFilter}},
	}
	mod(h)
	f, err := Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Options{Logger: log, Clusters: cm, Codec: codec})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := tls.Server(c, cfg)
			if err := tc.Handshake(); err != nil {
				c.Close()
				continue
			}
			s.ServeConn(tc, f, netip.MustParseAddrPort(ln.Addr().String()), cluster.OriginalSource{})
		}
	}()
	t.Cleanup(func() { ln.Close(); s.Close() })
	return ln.Addr().String()
}

// mutualTLS makes a CA, a server certificate and a client certificate
// whose only URI SAN is clientID.
func mutualTLS(t *testing.T, clientID string) (server, client *tls.Config) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	leaf := func(serial int64, tmpl *x509.Certificate) tls.Certificate {
		k := key()
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
	}
	u, err := url.Parse(clientID)
	if err != nil {
		t.Fatal(err)
	}
	srv := leaf(2, &x509.Certificate{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	cli := leaf(3, &x509.Certificate{URIs: []*url.URL{u}})
	server = &tls.Config{Certificates: []tls.Certificate{srv}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	client = &tls.Config{Certificates: []tls.Certificate{cli}, RootCAs: pool}
	return server, client
}

func TestRBACFilterRefusals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		filters []*hcmv3.HttpFilter
		want    string
	}{
		{"matcher", []*hcmv3.HttpFilter{rbacFilter(t, &rbachttpv3.RBAC{Matcher: &xdsmatcherv3.Matcher{}})}, "matcher is not supported"},
		{"track_per_rule_stats", []*hcmv3.HttpFilter{rbacFilter(t, &rbachttpv3.RBAC{TrackPerRuleStats: true})}, "track_per_rule_stats"},
		{"a CEL condition", []*hcmv3.HttpFilter{rbacFilter(t, &rbachttpv3.RBAC{Rules: &rbacv3.RBAC{Policies: map[string]*rbacv3.Policy{
			"p": {Permissions: []*rbacv3.Permission{rbacAnyPerm}, Principals: []*rbacv3.Principal{rbacAnyID}, Condition: &exprv1alpha1.Expr{}}}}})}, "rules.policies[p].condition"},
		{"shadow rules", []*hcmv3.HttpFilter{rbacFilter(t, &rbachttpv3.RBAC{ShadowRules: &rbacv3.RBAC{Policies: map[string]*rbacv3.Policy{
			"p": {Permissions: []*rbacv3.Permission{rbacAnyPerm}}}}})}, "shadow_rules.policies[p].principals"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &hcmv3.HttpConnectionManager{
				StatPrefix: "test",
				RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
					Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{prefixRoute("/", "be")}}}}},
				HttpFilters: append(tc.filters, &hcmv3.HttpFilter{Name: routerFilter}),
			}
			_, err := Build(h, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "envoy.filters.http.rbac") {
				t.Errorf("Build: %v, want an error naming envoy.filters.http.rbac and %q", err, tc.want)
			}
		})
	}
}

// TestRBACAllocatesNothingHTTP1: on the HTTP/1.1 codec the RBAC filter's
// input is the stream's own (h1stream.RBACInput): checking a request
// allocates nothing, allowed or denied by path and header.
func TestRBACAllocatesNothingHTTP1(t *testing.T) {
	hdr := &rbacv3.Permission{Rule: &rbacv3.Permission_Header{Header: &routev3.HeaderMatcher{Name: "x-role",
		HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "admin"}}}}}}
	allow := rbacFilter(t, &rbachttpv3.RBAC{Rules: &rbacv3.RBAC{Action: rbacv3.RBAC_ALLOW, Policies: map[string]*rbacv3.Policy{
		"api": {Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_AndRules{AndRules: &rbacv3.Permission_Set{Rules: []*rbacv3.Permission{rbacPathPrefix("/api"), hdr}}}}},
			Principals: []*rbacv3.Principal{rbacAnyID}}}}})
	f, err := Build(&hcmv3.HttpConnectionManager{
		StatPrefix: "test",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{prefixRoute("/", "be")}}}}},
		HttpFilters: []*hcmv3.HttpFilter{allow, {Name: routerFilter}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &h1conn{filter: f, authz: &rbac.Connection{}, fconn: &httpfilter.Connection{}}
	if err := http1.ParseRequest([]byte("GET /api/x HTTP/1.1\r\nHost: svc\r\nX-Role: admin\r\n\r\n"), &c.req); err != nil {
		t.Fatal(err)
	}
	st := &c.stream
	if n := testing.AllocsPerRun(200, func() {
		c.meta.Reset()
		st.begin(c)
		st.rreq = route.Request{Host: "svc", Path: "/api/x", Method: "GET", Headers: &c.req.Headers}
		if st.decode(st) {
			t.Fatal("denied")
		}
	}); n != 0 {
		t.Errorf("an allowed request costs RBAC %v allocations", n)
	}
}
