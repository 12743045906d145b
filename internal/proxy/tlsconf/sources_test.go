package tlsconf

import (
	"context"
	"crypto/x509"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestInlineAndFileSources: certificates and trust bundles given inline
// (bytes, string) or as files, and the untyped match_subject_alt_names,
// make the same mutual handshake as SDS does.
func TestInlineAndFileSources(t *testing.T) {
	ca := newCA(t)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sc, sk, _ := ca.issue(t, serverID)
	cc, ck, _ := ca.issue(t, clientID)
	file := func(p string) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: p}}
	}
	srv, err := NewServer(socket(t, &tlsv3.DownstreamTlsContext{
		RequireClientCertificate: wrapperspb.Bool(true),
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificates: []*tlsv3.TlsCertificate{{CertificateChain: file(write("s.pem", sc)), PrivateKey: file(write("s.key", sk))}},
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: string(ca.pem)}},
			}},
		},
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := NewClient(socket(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificates: []*tlsv3.TlsCertificate{{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: cc}},
			PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: ck}},
		}},
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: file(write("ca.pem", ca.pem)),
			MatchSubjectAltNames: []*matcherv3.StringMatcher{
				{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "spiffe://elsewhere/ns/x/sa/y"}},
				{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "spiffe://cluster.local/ns/default/"}},
			},
		}},
	}}), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &pair{client: cl, server: srv}
	tc, cerr, serr := p.dial(t)
	if cerr != nil || serr != nil {
		t.Fatalf("handshake: client %v, server %v", cerr, serr)
	}
	echo(t, tc, "inline and files")

	if _, err := NewClient(socket(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificates: []*tlsv3.TlsCertificate{{CertificateChain: file(filepath.Join(dir, "missing.pem")), PrivateKey: file(write("k", ck))}},
	}}), nil); err == nil || !strings.Contains(err.Error(), "tls_certificates[0].certificate_chain") {
		t.Errorf("missing file: %v, want an error naming the field", err)
	}
	if _, err := NewClient(socket(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{sdsConfig("default")},
	}}), nil); err == nil || !strings.Contains(err.Error(), "SDS secrets are not available") {
		t.Errorf("SDS without a provider: %v", err)
	}
}

// TestWrongContextType: a TLS socket whose typed_config is the other
// side's context is refused, naming both types.
func TestWrongContextType(t *testing.T) {
	_, err := NewClient(socket(t, &tlsv3.DownstreamTlsContext{}), nil)
	if err == nil || !strings.Contains(err.Error(), "UpstreamTlsContext") {
		t.Errorf("client with a DownstreamTlsContext: %v", err)
	}
	_, err = NewServer(socket(t, &tlsv3.UpstreamTlsContext{}), nil)
	if err == nil || !strings.Contains(err.Error(), "DownstreamTlsContext") {
		t.Errorf("server with an UpstreamTlsContext: %v", err)
	}
}

func TestStringAndSANMatchers(t *testing.T) {
	u, _ := url.Parse("spiffe://cluster.local/ns/Prod/sa/web")
	leaf := &x509.Certificate{URIs: []*url.URL{u}, DNSNames: []string{"web.prod.svc"}}
	sm := func(m *matcherv3.StringMatcher) func(string) bool {
		t.Helper()
		f, err := stringMatcher(m, "m")
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, tc := range []struct {
		name  string
		kind  tlsv3.SubjectAltNameMatcher_SanType
		m     *matcherv3.StringMatcher
		match bool
	}{
		{"uri exact", tlsv3.SubjectAltNameMatcher_URI, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: u.String()}}, true},
		{"uri exact other case", tlsv3.SubjectAltNameMatcher_URI, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "spiffe://cluster.local/ns/prod/sa/web"}}, false},
		{"uri exact ignore_case", tlsv3.SubjectAltNameMatcher_URI, &matcherv3.StringMatcher{IgnoreCase: true, MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "spiffe://cluster.local/ns/prod/sa/web"}}, true},
		{"uri suffix", tlsv3.SubjectAltNameMatcher_URI, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: "/sa/web"}}, true},
		{"uri contains", tlsv3.SubjectAltNameMatcher_URI, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "/ns/Prod/"}}, true},
		{"uri regex", tlsv3.SubjectAltNameMatcher_URI, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "spiffe://[^/]+/ns/Prod/sa/web"}}}, true},
		{"uri regex is anchored", tlsv3.SubjectAltNameMatcher_URI, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "ns/Prod"}}}, false},
		{"dns name is not a URI", tlsv3.SubjectAltNameMatcher_URI, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "web.prod.svc"}}, false},
		{"dns", tlsv3.SubjectAltNameMatcher_DNS, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "web.prod.svc"}}, true},
		{"uri is not a dns name", tlsv3.SubjectAltNameMatcher_DNS, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: u.String()}}, false},
		{"untyped sees dns", tlsv3.SubjectAltNameMatcher_SAN_TYPE_UNSPECIFIED, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "web."}}, true},
		{"email none", tlsv3.SubjectAltNameMatcher_EMAIL, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: ""}}, false},
	} {
		got := sanMatches([]sanMatcher{{kind: tc.kind, match: sm(tc.m)}}, leaf)
		if got != tc.match {
			t.Errorf("%s: match %v, want %v", tc.name, got, tc.match)
		}
	}
	if !sanMatches(nil, leaf) {
		t.Error("no matchers must accept any SAN")
	}
	if _, err := stringMatcher(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "("}}}, "m"); err == nil {
		t.Error("a bad regex was accepted")
	}
}

// TestSDSNacksBadSecret: a secret that does not parse is NACKed and not
// used; a handshake waiting for it gives up at its deadline.
func TestSDSNacksBadSecret(t *testing.T) {
	f := startSDS(t)
	f.set([]byte("not a certificate"), []byte("nor a key"), []byte("nor a root"))
	cl, err := NewClient(socket(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: istioCommon([]string{"istio"}, serverID)}), provider(t, f))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.nacks.Load() < 2 && time.Now().Before(deadline) { // default and ROOTCA
		time.Sleep(10 * time.Millisecond)
	}
	if n := f.nacks.Load(); n < 2 {
		t.Fatalf("NACKs = %d, want one per bad secret (2)", n)
	}
	c1, c2 := tcpPairConns(t)
	defer c2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := cl.Handshake(ctx, c1); err == nil || !strings.Contains(err.Error(), "not received") {
		t.Errorf("handshake with only bad secrets: %v, want a secret-not-received error", err)
	}
}

func tcpPairConns(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	c1, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c2, err := lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return c1, c2
}

// TestParamsAndCountsRefused covers the bounds of what a context may ask.
func TestParamsAndCountsRefused(t *testing.T) {
	prov := NewProvider(ProviderOptions{})
	defer prov.Close()
	params := func(min, max tlsv3.TlsParameters_TlsProtocol) *tlsv3.UpstreamTlsContext {
		return &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{TlsParams: &tlsv3.TlsParameters{TlsMinimumProtocolVersion: min, TlsMaximumProtocolVersion: max}}}
	}
	if _, err := NewClient(socket(t, params(tlsv3.TlsParameters_TLSv1_3, tlsv3.TlsParameters_TLSv1_3)), prov); err != nil {
		t.Errorf("TLS 1.3 only: %v", err)
	}
	if _, err := NewClient(socket(t, params(tlsv3.TlsParameters_TLSv1_3, tlsv3.TlsParameters_TLSv1_2)), prov); err == nil || !strings.Contains(err.Error(), "above tls_maximum_protocol_version") {
		t.Errorf("min above max: %v", err)
	}
	two := &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{sdsConfig("default"), sdsConfig("other")}}}
	if _, err := NewClient(socket(t, two), prov); err == nil || !strings.Contains(err.Error(), "more than one certificate") {
		t.Errorf("two certificates: %v", err)
	}
	twoServices := sdsConfig("default")
	gs := twoServices.GetSdsConfig().GetApiConfigSource()
	gs.GrpcServices = append(gs.GrpcServices, gs.GrpcServices[0])
	if _, err := NewClient(socket(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{twoServices}}}), prov); err == nil || !strings.Contains(err.Error(), "exactly one envoy_grpc") {
		t.Errorf("two gRPC services: %v", err)
	}
}

// TestRequireSNI: a server with require_sni refuses a ClientHello without
// a server name and accepts one with it.
func TestRequireSNI(t *testing.T) {
	ca := newCA(t)
	sc, sk, _ := ca.issue(t, serverID)
	srv, err := NewServer(socket(t, &tlsv3.DownstreamTlsContext{
		RequireSni: wrapperspb.Bool(true),
		CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificates: []*tlsv3.TlsCertificate{{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: sc}},
			PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: sk}},
		}}},
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sni := range []string{"", "server"} {
		cl, err := NewClient(socket(t, &tlsv3.UpstreamTlsContext{Sni: sni}), nil)
		if err != nil {
			t.Fatal(err)
		}
		p := &pair{client: cl, server: srv}
		_, cerr, serr := p.dial(t)
		if ok := cerr == nil && serr == nil; ok != (sni != "") {
			t.Errorf("SNI %q: client %v, server %v", sni, cerr, serr)
		}
	}
}

// TestWildcardDNSSAN: an exact DNS (or untyped) matcher accepts a
// certificate for *.example.com when it names one label below it, as
// Envoy's DNS SAN matcher does; other patterns and other SAN kinds do not
// get the wildcard.
func TestWildcardDNSSAN(t *testing.T) {
	leaf := &x509.Certificate{DNSNames: []string{"*.example.com"}}
	exact := func(s string) *matcherv3.StringMatcher {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
	}
	for _, tc := range []struct {
		name  string
		kind  tlsv3.SubjectAltNameMatcher_SanType
		exact string
		match bool
	}{
		{"dns one label below", tlsv3.SubjectAltNameMatcher_DNS, "api.example.com", true},
		{"untyped one label below", tlsv3.SubjectAltNameMatcher_SAN_TYPE_UNSPECIFIED, "API.Example.com", true},
		{"two labels below", tlsv3.SubjectAltNameMatcher_DNS, "a.api.example.com", false},
		{"the bare domain", tlsv3.SubjectAltNameMatcher_DNS, "example.com", false},
		{"other domain", tlsv3.SubjectAltNameMatcher_DNS, "api.example.org", false},
		{"uri kind", tlsv3.SubjectAltNameMatcher_URI, "api.example.com", false},
	} {
		vc := &tlsv3.CertificateValidationContext{}
		if tc.kind == tlsv3.SubjectAltNameMatcher_SAN_TYPE_UNSPECIFIED {
			vc.MatchSubjectAltNames = []*matcherv3.StringMatcher{exact(tc.exact)}
		} else {
			vc.MatchTypedSubjectAltNames = []*tlsv3.SubjectAltNameMatcher{{SanType: tc.kind, Matcher: exact(tc.exact)}}
		}
		ms, err := buildSANs(vc, "v")
		if err != nil {
			t.Fatal(err)
		}
		if got := sanMatches(ms, leaf); got != tc.match {
			t.Errorf("%s: match %v, want %v", tc.name, got, tc.match)
		}
	}
	prefix := &tlsv3.CertificateValidationContext{MatchSubjectAltNames: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "api."}}}}
	ms, _ := buildSANs(prefix, "v")
	if sanMatches(ms, leaf) {
		t.Error("a prefix matcher matched a wildcard SAN")
	}
}
