package gen

import (
	"net/netip"
	"strings"
	"testing"

	rbachttp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	rbactcp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/rbac"
	"github.com/straitmesh/strait/internal/proxy/route"
)

// authzRequest is one request to the workload under test (namespace
// shop, port 8080 at 10.94.0.11).
type authzRequest struct {
	name    string
	from    string // the client's SPIFFE ID; "" is plaintext
	src     string // the client's IP (default 10.0.0.5)
	method  string // default GET
	path    string // default /
	host    string // default server.shop
	headers map[string]string
	jwt     map[string]any // istio_authn metadata
	tcp     bool           // a TCP connection (network filters)
	port    uint16         // default 8080
	want    bool
}

type headerMap map[string]string

func (h headerMap) Lookup(name string) (string, bool) {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// decide runs what straitd generates for policies through strait-proxy's
// RBAC engine, as the proxy runs its filters: every filter in order, the
// first denial wins.
func decide(t *testing.T, f authzFilters, r authzRequest) bool {
	t.Helper()
	src, port := netip.MustParseAddr("10.0.0.5"), r.port
	if r.src != "" {
		src = netip.MustParseAddr(r.src)
	}
	if port == 0 {
		port = 8080
	}
	conn := &rbac.Connection{Source: netip.AddrPortFrom(src, 40000), Destination: netip.AddrPortFrom(netip.MustParseAddr("10.94.0.11"), port)}
	if r.from != "" {
		conn.Secure, conn.URISANs = true, []string{r.from}
	}
	in := &rbac.Input{Conn: conn}
	var filters []*rbac.Filter
	if r.tcp {
		for _, nf := range f.tcp {
			var cfg rbactcp.RBAC
			if err := nf.GetTypedConfig().UnmarshalTo(&cfg); err != nil {
				t.Fatal(err)
			}
			rf, _, err := rbac.ParseNetwork(nf.GetTypedConfig())
			if err != nil {
				t.Fatalf("strait-proxy refuses the network filter: %v", err)
			}
			filters = append(filters, rf)
		}
	} else {
		in.Request = &route.Request{Method: "GET", Path: "/", Host: "server.shop", Scheme: "http", Headers: headerMap(r.headers)}
		if r.method != "" {
			in.Request.Method = r.method
		}
		if r.path != "" {
			in.Request.Path = r.path
		}
		if r.host != "" {
			in.Request.Host = r.host
		}
		md := &httpfilter.Metadata{}
		for k, v := range r.jwt {
			md.Set("istio_authn", k, v)
		}
		in.Metadata = md
		for _, hf := range f.http {
			var cfg rbachttp.RBAC
			if err := hf.GetTypedConfig().UnmarshalTo(&cfg); err != nil {
				t.Fatal(err)
			}
			rf, err := rbac.NewFilter(cfg.Rules, cfg.ShadowRules, cfg.RulesStatPrefix, cfg.ShadowRulesStatPrefix)
			if err != nil {
				t.Fatalf("strait-proxy refuses the HTTP filter: %v", err)
			}
			filters = append(filters, rf)
		}
	}
	for _, rf := range filters {
		if !rf.Check(in) {
			return false
		}
	}
	return true
}

func policiesFor(t *testing.T, yaml string) mesh.AuthorizationPolicies {
	t.Helper()
	res := istioconfig.ParseFile("p.yaml", []byte(yaml))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	store := istioconfig.NewStore()
	for _, c := range res.Configs {
		if err := store.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	snap, _ := mesh.Build(store, mesh.BuildOptions{})
	return snap.AuthorizationPoliciesFor("shop", map[string]string{"app": "server"})
}

const apHead = "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: p, namespace: shop}\nspec:\n"

// TestAuthzSemantics: what an AuthorizationPolicy allows, once straitd has
// translated it and strait-proxy's engine runs it, is what Istio documents.
func TestAuthzSemantics(t *testing.T) {
	const client = "spiffe://cluster.local/ns/shop/sa/client"
	const stranger = "spiffe://cluster.local/ns/other/sa/default"
	for _, tc := range []struct {
		name   string
		policy string
		reqs   []authzRequest
	}{
		{"no policy allows all", "", []authzRequest{{name: "anyone", want: true}, {name: "tcp", tcp: true, want: true}}},
		{"allow principal", apHead + "  rules: [{from: [{source: {principals: [cluster.local/ns/shop/sa/client]}}]}]\n", []authzRequest{
			{name: "client", from: client, want: true},
			{name: "stranger", from: stranger},
			{name: "plaintext", from: ""},
			{name: "client over tcp", from: client, tcp: true, want: true},
		}},
		{"allow principal wildcards", apHead + "  rules: [{from: [{source: {principals: [\"*/sa/client\", \"cluster.local/ns/other/*\"]}}]}]\n", []authzRequest{
			{name: "suffix", from: client, want: true},
			{name: "prefix", from: stranger, want: true},
			{name: "neither", from: "spiffe://cluster.local/ns/x/sa/y"},
		}},
		{"any authenticated principal", apHead + "  rules: [{from: [{source: {principals: [\"*\"]}}]}]\n", []authzRequest{
			{name: "mTLS", from: stranger, want: true},
			{name: "plaintext"},
		}},
		{"notPrincipals", apHead + "  rules: [{from: [{source: {notPrincipals: [cluster.local/ns/other/sa/default]}}]}]\n", []authzRequest{
			{name: "client", from: client, want: true},
			{name: "stranger", from: stranger},
		}},
		{"namespaces", apHead + "  rules: [{from: [{source: {namespaces: [\"sh*\"]}}]}]\n", []authzRequest{
			{name: "shop", from: client, want: true},
			{name: "other", from: stranger},
		}},
		{"serviceAccounts default to the policy namespace", apHead + "  rules: [{from: [{source: {serviceAccounts: [client, other/default]}}]}]\n", []authzRequest{
			{name: "shop/client", from: client, want: true},
			{name: "other/default", from: stranger, want: true},
			{name: "shop/client-x", from: "spiffe://cluster.local/ns/shop/sa/client-x"},
		}},
		{"trustDomains", apHead + "  rules: [{from: [{source: {trustDomains: [\"cluster.*\"]}}]}]\n", []authzRequest{
			{name: "cluster.local", from: client, want: true},
			{name: "other domain", from: "spiffe://example.org/ns/shop/sa/client"},
		}},
		{"ipBlocks and notIpBlocks", apHead + "  rules: [{from: [{source: {ipBlocks: [10.0.0.0/8], notIpBlocks: [10.0.0.9]}}]}]\n", []authzRequest{
			{name: "in", src: "10.0.0.5", want: true},
			{name: "excluded", src: "10.0.0.9"},
			{name: "out", src: "192.168.0.1"},
			{name: "tcp in", src: "10.1.2.3", tcp: true, want: true},
		}},
		{"remoteIpBlocks use x-forwarded-for", apHead + "  rules: [{from: [{source: {remoteIpBlocks: [203.0.113.0/24]}}]}]\n", []authzRequest{
			{name: "peer", src: "203.0.113.1", want: true},
		}},
		{"operation wildcards", apHead + "  rules: [{to: [{operation: {methods: [GET], paths: [/api/*, \"*.css\", /exact], hosts: [\"*.shop\"]}}]}]\n", []authzRequest{
			{name: "prefix", path: "/api/v1", want: true},
			{name: "suffix", path: "/s/site.css", want: true},
			{name: "exact", path: "/exact", want: true},
			{name: "exact is exact", path: "/exactly"},
			{name: "method", method: "POST", path: "/api/v1"},
			{name: "host case-insensitive", host: "SERVER.SHOP", path: "/exact", want: true},
			{name: "host", host: "server.other", path: "/exact"},
			{name: "tcp: the rule matches nothing", tcp: true},
		}},
		{"path templates", apHead + "  rules: [{to: [{operation: {paths: [\"/api/{*}/info\", \"/files/{**}\"], notPaths: [\"/files/{*}/secret/{**}\"]}}]}]\n", []authzRequest{
			{name: "one segment", path: "/api/x/info", want: true},
			{name: "two segments", path: "/api/x/y/info"},
			{name: "no segment", path: "/api/info"},
			{name: "any segments", path: "/files/a/b/c", want: true},
			{name: "notPaths template", path: "/files/a/secret/b"},
			{name: "notPaths template needs its segment", path: "/files/secret/b", want: true},
			{name: "tcp: the rule matches nothing", tcp: true},
		}},
		{"deny by path template", apHead + "  action: DENY\n  rules: [{to: [{operation: {paths: [\"/admin/{*}\"]}}]}]\n", []authzRequest{
			{name: "one segment", path: "/admin/x"},
			{name: "deeper", path: "/admin/x/y", want: true},
			{name: "tcp: the deny's path is dropped, so it denies all", tcp: true},
		}},
		{"ports", apHead + "  rules: [{to: [{operation: {ports: [\"9000\"]}}]}]\n", []authzRequest{
			{name: "9000", port: 9000, want: true},
			{name: "8080", port: 8080},
			{name: "tcp 9000", port: 9000, tcp: true, want: true},
		}},
		{"when header", apHead + "  rules: [{when: [{key: \"request.headers[x-token]\", values: [\"abc*\"]}, {key: \"request.headers[x-bad]\", notValues: [\"*\"]}]}]\n", []authzRequest{
			{name: "token", headers: map[string]string{"x-token": "abcdef"}, want: true},
			{name: "wrong token", headers: map[string]string{"x-token": "xyz"}},
			{name: "token and bad", headers: map[string]string{"x-token": "abc", "x-bad": "1"}},
			{name: "none"},
		}},
		{"when destination and source", apHead + "  rules: [{when: [{key: destination.port, values: [\"8080\"]}, {key: source.namespace, values: [shop]}, {key: destination.ip, values: [10.94.0.0/16]}]}]\n", []authzRequest{
			{name: "match", from: client, want: true},
			{name: "other namespace", from: stranger},
			{name: "other port", from: client, port: 8081},
		}},
		{"request principals and claims", apHead + "  rules: [{from: [{source: {requestPrincipals: [\"https://issuer.example/*\"]}}], when: [{key: \"request.auth.claims[groups]\", values: [ops]}, {key: request.auth.audiences, values: [api]}]}]\n", []authzRequest{
			{name: "token with the group", jwt: map[string]any{"request.auth.principal": "https://issuer.example/alice", "request.auth.audiences": []string{"api"},
				"request.auth.claims": map[string]any{"groups": []any{"dev", "ops"}}}, want: true},
			{name: "string claim", jwt: map[string]any{"request.auth.principal": "https://issuer.example/alice", "request.auth.audiences": []string{"api"},
				"request.auth.claims": map[string]any{"groups": "ops"}}, want: true},
			{name: "other group", jwt: map[string]any{"request.auth.principal": "https://issuer.example/alice", "request.auth.audiences": []string{"api"},
				"request.auth.claims": map[string]any{"groups": []any{"dev"}}}},
			{name: "other issuer", jwt: map[string]any{"request.auth.principal": "https://evil.example/alice", "request.auth.audiences": []string{"api"},
				"request.auth.claims": map[string]any{"groups": "ops"}}},
			{name: "no token"},
			{name: "tcp: the rule matches nothing", tcp: true},
		}},
		{"deny beats allow", apHead + "  action: DENY\n  rules: [{to: [{operation: {paths: [/admin*]}}]}]\n---\n" +
			strings.Replace(apHead, "name: p", "name: q", 1) + "  rules: [{from: [{source: {principals: [\"*\"]}}]}]\n", []authzRequest{
			{name: "admin", from: client, path: "/admin/x"},
			{name: "other path", from: client, path: "/x", want: true},
			{name: "plaintext", path: "/x"},
			{name: "tcp: the deny's path is dropped, so it denies all", from: client, tcp: true},
		}},
		{"allow nothing", apHead + "  {}\n", []authzRequest{{name: "anyone", from: client}, {name: "tcp", tcp: true}}},
		// A policy without rules matches nothing; the next policy of the
		// action still counts.
		{"allow nothing, then allow principal", apHead + "  {}\n---\n" + strings.Replace(apHead, "name: p,", "name: q,", 1) +
			"  rules: [{from: [{source: {principals: [cluster.local/ns/shop/sa/client]}}]}]\n", []authzRequest{
			{name: "client", from: client, want: true},
			{name: "stranger", from: stranger},
		}},
		{"deny with empty rule denies all", apHead + "  action: DENY\n  rules: [{}]\n", []authzRequest{{name: "anyone", from: client}}},
		{"audit never denies", apHead + "  action: AUDIT\n  rules: [{}]\n", []authzRequest{{name: "anyone", want: true}, {name: "tcp", tcp: true, want: true}}},
		{"dry-run is not enforced", strings.Replace(apHead, "namespace: shop}", "namespace: shop, annotations: {istio.io/dry-run: \"true\"}}", 1) + "  action: DENY\n  rules: [{}]\n",
			[]authzRequest{{name: "anyone", want: true}, {name: "tcp", tcp: true, want: true}}},
		{"other selector does not apply", apHead + "  selector: {matchLabels: {app: nope}}\n  action: DENY\n  rules: [{}]\n", []authzRequest{{name: "anyone", want: true}}},
		{"root namespace applies", strings.Replace(apHead, "namespace: shop", "namespace: istio-system", 1) + "  action: DENY\n  rules: [{}]\n", []authzRequest{{name: "anyone"}}},
		{"other namespace does not apply", strings.Replace(apHead, "namespace: shop", "namespace: else", 1) + "  action: DENY\n  rules: [{}]\n", []authzRequest{{name: "anyone", want: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := buildAuthz(policiesFor(t, tc.policy), trustDomains{"cluster.local"})
			for _, r := range tc.reqs {
				if got := decide(t, f, r); got != r.want {
					t.Errorf("%s: allowed %v, want %v", r.name, got, r.want)
				}
			}
		})
	}
}

// TestAuthzTrustDomains: principals and trust domains are read against
// the mesh's trust domain bundle as Istio's MigrateTrustDomain does:
// cluster.local stands for the mesh's trust domain, whatever it is; with
// aliases, a principal of any of the bundle's trust domains matches the
// identities of all of them; other trust domains and "*" stay as written.
func TestAuthzTrustDomains(t *testing.T) {
	const (
		newTD = "spiffe://td-new/ns/shop/sa/client"
		oldTD = "spiffe://td-old/ns/shop/sa/client"
		other = "spiffe://td-other/ns/shop/sa/client"
	)
	allow := func(from string) string {
		return apHead + "  rules: [{from: [{source: {" + from + "}}]}]\n"
	}
	for _, tc := range []struct {
		name   string
		tds    trustDomains
		policy string
		reqs   []authzRequest
	}{
		{"cluster.local is the mesh's trust domain", trustDomains{"td-new"}, allow(`principals: ["cluster.local/ns/shop/sa/client"]`), []authzRequest{
			{name: "mesh trust domain", from: newTD, want: true},
			{name: "literal cluster.local", from: "spiffe://cluster.local/ns/shop/sa/client"},
			{name: "over tcp", from: newTD, tcp: true, want: true},
		}},
		{"cluster.local in a when condition", trustDomains{"td-new"}, apHead + "  rules: [{when: [{key: source.principal, values: [cluster.local/ns/shop/sa/client]}]}]\n", []authzRequest{
			{name: "mesh trust domain", from: newTD, want: true},
			{name: "other trust domain", from: other},
		}},
		{"cluster.local in notPrincipals", trustDomains{"td-new"}, apHead + "  action: DENY\n  rules: [{from: [{source: {notPrincipals: [cluster.local/ns/shop/sa/client]}}]}]\n", []authzRequest{
			{name: "mesh trust domain is not denied", from: newTD, want: true},
			{name: "other trust domain is denied", from: other},
		}},
		{"an old trust domain without an alias", trustDomains{"td-new"}, allow(`principals: ["td-old/ns/shop/sa/client"]`), []authzRequest{
			{name: "new identity", from: newTD},
			{name: "old identity", from: oldTD, want: true},
		}},
		{"an old trust domain with an alias", trustDomains{"td-new", "td-old"}, allow(`principals: ["td-old/ns/shop/sa/client"]`), []authzRequest{
			{name: "new identity", from: newTD, want: true},
			{name: "old identity", from: oldTD, want: true},
			{name: "other trust domain", from: other},
			{name: "other service account", from: "spiffe://td-new/ns/shop/sa/x"},
		}},
		{"cluster.local with an alias", trustDomains{"td-new", "td-old"}, allow(`principals: ["cluster.local/ns/shop/sa/client"]`), []authzRequest{
			{name: "new identity", from: newTD, want: true},
			{name: "old identity", from: oldTD, want: true},
		}},
		{"another trust domain stays", trustDomains{"td-new", "td-old"}, allow(`principals: ["td-other/ns/shop/sa/client"]`), []authzRequest{
			{name: "new identity", from: newTD},
			{name: "other identity", from: other, want: true},
		}},
		{"a wildcard trust domain stays", trustDomains{"td-new"}, allow(`principals: ["*/ns/shop/sa/client"]`), []authzRequest{
			{name: "any trust domain", from: other, want: true},
		}},
		{"a suffix wildcard covering the bundle stays", trustDomains{"td-new", "td-old"}, allow(`principals: ["*-old/ns/shop/sa/client"]`), []authzRequest{
			{name: "old identity", from: oldTD, want: true},
			{name: "new identity", from: newTD, want: true},
		}},
		{"trustDomains expands to the aliases", trustDomains{"td-new", "td-old"}, allow(`trustDomains: ["td-old"]`), []authzRequest{
			{name: "new identity", from: newTD, want: true},
			{name: "old identity", from: oldTD, want: true},
			{name: "other", from: other},
		}},
		{"trustDomains without aliases", trustDomains{"td-new"}, allow(`trustDomains: ["td-old"]`), []authzRequest{
			{name: "new identity", from: newTD},
			{name: "old identity", from: oldTD, want: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := buildAuthz(policiesFor(t, tc.policy), tc.tds)
			for _, r := range tc.reqs {
				if got := decide(t, f, r); got != r.want {
					t.Errorf("%s: allowed %v, want %v", r.name, got, r.want)
				}
			}
		})
	}
}

func TestClaimPath(t *testing.T) {
	for in, want := range map[string]string{"[a]": "a", "[a][b]": "a,b", "[a.b]": "a.b"} {
		got, err := claimPath(in)
		if err != nil || strings.Join(got, ",") != want {
			t.Errorf("claimPath(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a", "[a", "[]", "[a]b"} {
		if got, err := claimPath(in); err == nil {
			t.Errorf("claimPath(%q) = %v, want an error", in, got)
		}
	}
}
