package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
)

// Transport socket names and typed_config types.
const (
	SocketTLS       = "envoy.transport_sockets.tls"
	SocketRawBuffer = "envoy.transport_sockets.raw_buffer"
	upstreamType    = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"
	downstreamType  = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext"
	rawBufferType   = "type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer"
)

// common is a built CommonTlsContext. Read-only once built; the secrets it
// points to change underneath (atomically).
type common struct {
	cert       *Secret // nil: no certificate of our own
	roots      *Secret // nil: no trust bundle (peer not verified)
	sans       []sanMatcher
	alpn       []string
	minVersion uint16
	maxVersion uint16
	ciphers    []uint16
	curves     []tls.CurveID
	crls       crlSet // nil: no revocation check
}

// isTLS reports whether ts asks for TLS: false for no socket and for
// raw_buffer, an error for any other socket.
func isTLS(ts *corev3.TransportSocket, wantType string) (bool, error) {
	if ts == nil {
		return false, nil
	}
	tc := ts.GetTypedConfig()
	switch {
	case ts.GetName() == SocketRawBuffer || tc.GetTypeUrl() == rawBufferType:
		return false, nil
	case ts.GetName() == SocketTLS || tc.GetTypeUrl() == wantType:
		if tc == nil {
			return false, fmt.Errorf("transport_socket %q: typed_config is missing", ts.GetName())
		}
		if tc.GetTypeUrl() != wantType {
			return false, fmt.Errorf("transport_socket %q: typed_config is %q, want %q", ts.GetName(), tc.GetTypeUrl(), wantType)
		}
		return true, nil
	default:
		return false, fmt.Errorf("transport_socket %q is not supported (want %s or %s)", ts.GetName(), SocketTLS, SocketRawBuffer)
	}
}

func buildCommon(c *tlsv3.CommonTlsContext, p *Provider, path string) (*common, error) {
	if err := fieldaudit.Check(path, c.ProtoReflect(), commonHonoured, commonRefused); err != nil {
		return nil, err
	}
	out := &common{alpn: slices.Clone(c.GetAlpnProtocols()), minVersion: tls.VersionTLS12, maxVersion: tls.VersionTLS13}
	if err := out.params(c.GetTlsParams(), path+".tls_params"); err != nil {
		return nil, err
	}
	switch n := len(c.GetTlsCertificates()) + len(c.GetTlsCertificateSdsSecretConfigs()); {
	case n > 1:
		return nil, fmt.Errorf("%s: more than one certificate (tls_certificates and tls_certificate_sds_secret_configs) is not supported", path)
	case len(c.GetTlsCertificates()) == 1:
		cert, err := parseCertificate(c.GetTlsCertificates()[0], path+".tls_certificates[0]")
		if err != nil {
			return nil, err
		}
		out.cert = staticSecret("inline", &secretValue{cert: cert})
	case len(c.GetTlsCertificateSdsSecretConfigs()) == 1:
		s, err := p.sdsSecret(c.GetTlsCertificateSdsSecretConfigs()[0], path+".tls_certificate_sds_secret_configs[0]")
		if err != nil {
			return nil, err
		}
		out.cert = s
	}
	var def *tlsv3.CertificateValidationContext
	var defPath string
	switch {
	case c.GetValidationContext() != nil:
		def, defPath = c.GetValidationContext(), path+".validation_context"
		if err := checkValidation(def, path+".validation_context"); err != nil {
			return nil, err
		}
		roots, err := trustedCA(def, path+".validation_context")
		if err != nil {
			return nil, err
		}
		if roots != nil {
			out.roots = staticSecret("inline", &secretValue{roots: roots})
		}
	case c.GetValidationContextSdsSecretConfig() != nil:
		s, err := p.sdsSecret(c.GetValidationContextSdsSecretConfig(), path+".validation_context_sds_secret_config")
		if err != nil {
			return nil, err
		}
		out.roots = s
	case c.GetCombinedValidationContext() != nil:
		cv := c.GetCombinedValidationContext()
		cp := path + ".combined_validation_context"
		if err := fieldaudit.Only(cp, cv.ProtoReflect(), combinedValidationFields); err != nil {
			return nil, err
		}
		def, defPath = cv.GetDefaultValidationContext(), cp+".default_validation_context"
		// The default context's own trusted_ca is replaced by the SDS
		// secret's, as Envoy merges them (the dynamic one wins).
		if err := checkValidation(def, cp+".default_validation_context"); err != nil {
			return nil, err
		}
		s, err := p.sdsSecret(cv.GetValidationContextSdsSecretConfig(), cp+".validation_context_sds_secret_config")
		if err != nil {
			return nil, err
		}
		out.roots = s
	}
	if def != nil {
		sans, err := buildSANs(def, path)
		if err != nil {
			return nil, err
		}
		out.sans = sans
		if out.crls, err = parseCRLs(def, defPath); err != nil {
			return nil, err
		}
		if out.crls != nil && out.roots == nil {
			return nil, fmt.Errorf("%s.crl needs a trust bundle to check certificates against", defPath)
		}
	}
	return out, nil
}

var tlsVersions = map[tlsv3.TlsParameters_TlsProtocol]uint16{
	tlsv3.TlsParameters_TLSv1_2: tls.VersionTLS12,
	tlsv3.TlsParameters_TLSv1_3: tls.VersionTLS13,
}

// cipherNames maps Envoy's (OpenSSL) cipher suite names to Go's TLS 1.2
// suites; TLS 1.3 suites are not configurable in crypto/tls.
var cipherNames = map[string]uint16{
	"ECDHE-ECDSA-AES128-GCM-SHA256": tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-RSA-AES128-GCM-SHA256":   tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-ECDSA-AES256-GCM-SHA384": tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-RSA-AES256-GCM-SHA384":   tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-ECDSA-CHACHA20-POLY1305": tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-RSA-CHACHA20-POLY1305":   tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	// Istio's and Envoy's default lists also name these.
	"AES128-GCM-SHA256":      tls.TLS_RSA_WITH_AES_128_GCM_SHA256,
	"AES256-GCM-SHA384":      tls.TLS_RSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-ECDSA-AES128-SHA": tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA,
	"ECDHE-RSA-AES128-SHA":   tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
	"ECDHE-ECDSA-AES256-SHA": tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA,
	"ECDHE-RSA-AES256-SHA":   tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA,
	"AES128-SHA":             tls.TLS_RSA_WITH_AES_128_CBC_SHA,
	"AES256-SHA":             tls.TLS_RSA_WITH_AES_256_CBC_SHA,
}

var curveNames = map[string]tls.CurveID{
	"X25519":     tls.X25519,
	"P-256":      tls.CurveP256,
	"P-384":      tls.CurveP384,
	"P-521":      tls.CurveP521,
	"prime256v1": tls.CurveP256,
}

func (c *common) params(p *tlsv3.TlsParameters, path string) error {
	if p == nil {
		return nil
	}
	if err := fieldaudit.Only(path, p.ProtoReflect(), tlsParametersFields); err != nil {
		return err
	}
	version := func(v tlsv3.TlsParameters_TlsProtocol, field string, def uint16) (uint16, error) {
		if v == tlsv3.TlsParameters_TLS_AUTO {
			return def, nil
		}
		if g, ok := tlsVersions[v]; ok {
			return g, nil
		}
		return 0, fmt.Errorf("%s.%s %s is not supported (want TLSv1_2 or TLSv1_3)", path, field, v)
	}
	var err error
	if c.minVersion, err = version(p.GetTlsMinimumProtocolVersion(), "tls_minimum_protocol_version", tls.VersionTLS12); err != nil {
		return err
	}
	if c.maxVersion, err = version(p.GetTlsMaximumProtocolVersion(), "tls_maximum_protocol_version", tls.VersionTLS13); err != nil {
		return err
	}
	if c.minVersion > c.maxVersion {
		return fmt.Errorf("%s: tls_minimum_protocol_version is above tls_maximum_protocol_version", path)
	}
	for _, n := range p.GetCipherSuites() {
		id, ok := cipherNames[n]
		if !ok {
			return fmt.Errorf("%s.cipher_suites %q is not supported (want an AES-GCM, AES-CBC-SHA or CHACHA20-POLY1305 suite by its OpenSSL name)", path, n)
		}
		c.ciphers = append(c.ciphers, id)
	}
	for _, n := range p.GetEcdhCurves() {
		id, ok := curveNames[n]
		if !ok {
			return fmt.Errorf("%s.ecdh_curves %q is not supported (want X25519, P-256, P-384 or P-521)", path, n)
		}
		c.curves = append(c.curves, id)
	}
	return nil
}

// sanMatcher matches one subject alternative name of a peer certificate.
type sanMatcher struct {
	kind  tlsv3.SubjectAltNameMatcher_SanType // SAN_TYPE_UNSPECIFIED: any kind (match_subject_alt_names)
	match func(string) bool
	// exact is the matcher's exact value, "" for other patterns: a DNS
	// SAN also matches it as a wildcard name (*.example.com), as Envoy's
	// DNS SAN matcher does (Utility::dnsNameMatch).
	exact string
}

func buildSANs(vc *tlsv3.CertificateValidationContext, path string) ([]sanMatcher, error) {
	var out []sanMatcher
	for i, m := range vc.GetMatchSubjectAltNames() {
		f, err := stringMatcher(m, fmt.Sprintf("%s.match_subject_alt_names[%d]", path, i))
		if err != nil {
			return nil, err
		}
		out = append(out, sanMatcher{match: f, exact: m.GetExact()})
	}
	for i, m := range vc.GetMatchTypedSubjectAltNames() {
		p := fmt.Sprintf("%s.match_typed_subject_alt_names[%d]", path, i)
		if err := fieldaudit.Only(p, m.ProtoReflect(), sanMatcherFields); err != nil {
			return nil, err
		}
		switch m.GetSanType() {
		case tlsv3.SubjectAltNameMatcher_URI, tlsv3.SubjectAltNameMatcher_DNS, tlsv3.SubjectAltNameMatcher_EMAIL, tlsv3.SubjectAltNameMatcher_IP_ADDRESS:
		default:
			return nil, fmt.Errorf("%s.san_type %s is not supported (want URI, DNS, EMAIL or IP_ADDRESS)", p, m.GetSanType())
		}
		f, err := stringMatcher(m.GetMatcher(), p+".matcher")
		if err != nil {
			return nil, err
		}
		out = append(out, sanMatcher{kind: m.GetSanType(), match: f, exact: m.GetMatcher().GetExact()})
	}
	return out, nil
}

// dnsNameMatch reports whether the certificate's DNS SAN san names host:
// equal (case-insensitively), or a wildcard "*.rest" whose rest equals
// host after its first label.
func dnsNameMatch(host, san string) bool {
	if strings.EqualFold(host, san) {
		return true
	}
	rest, ok := strings.CutPrefix(san, "*.")
	if !ok {
		return false
	}
	_, hostRest, ok := strings.Cut(host, ".")
	return ok && strings.EqualFold(hostRest, rest)
}

func stringMatcher(m *matcherv3.StringMatcher, path string) (func(string) bool, error) {
	if m == nil {
		return nil, fmt.Errorf("%s is missing", path)
	}
	if err := fieldaudit.Only(path, m.ProtoReflect(), stringMatcherFields); err != nil {
		return nil, err
	}
	fold := m.GetIgnoreCase()
	norm := func(s string) string {
		if fold {
			return strings.ToLower(s)
		}
		return s
	}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		want := norm(p.Exact)
		return func(s string) bool { return norm(s) == want }, nil
	case *matcherv3.StringMatcher_Prefix:
		want := norm(p.Prefix)
		return func(s string) bool { return strings.HasPrefix(norm(s), want) }, nil
	case *matcherv3.StringMatcher_Suffix:
		want := norm(p.Suffix)
		return func(s string) bool { return strings.HasSuffix(norm(s), want) }, nil
	case *matcherv3.StringMatcher_Contains:
		want := norm(p.Contains)
		return func(s string) bool { return strings.Contains(norm(s), want) }, nil
	case *matcherv3.StringMatcher_SafeRegex:
		re, err := regexp.Compile("^(?:" + p.SafeRegex.GetRegex() + ")$")
		if err != nil {
			return nil, fmt.Errorf("%s.safe_regex: %w", path, err)
		}
		return re.MatchString, nil
	default:
		return nil, fmt.Errorf("%s: no match pattern", path)
	}
}

// sanMatches reports whether any SAN of leaf matches any matcher (Envoy's
// semantics: one match is enough; no matchers accept every SAN).
func sanMatches(ms []sanMatcher, leaf *x509.Certificate) bool {
	if len(ms) == 0 {
		return true
	}
	var uris, dns, emails, ips []string
	for _, u := range leaf.URIs {
		uris = append(uris, u.String())
	}
	dns = leaf.DNSNames
	emails = leaf.EmailAddresses
	for _, ip := range leaf.IPAddresses {
		if a, ok := netip.AddrFromSlice(ip); ok {
			ips = append(ips, a.Unmap().String())
		}
	}
	for _, m := range ms {
		var cands []string
		switch m.kind {
		case tlsv3.SubjectAltNameMatcher_URI:
			cands = uris
		case tlsv3.SubjectAltNameMatcher_DNS:
			cands = dns
		case tlsv3.SubjectAltNameMatcher_EMAIL:
			cands = emails
		case tlsv3.SubjectAltNameMatcher_IP_ADDRESS:
			cands = ips
		default:
			cands = slices.Concat(uris, dns, emails, ips)
		}
		if slices.ContainsFunc(cands, m.match) {
			return true
		}
		if m.exact != "" && (m.kind == tlsv3.SubjectAltNameMatcher_DNS || m.kind == tlsv3.SubjectAltNameMatcher_SAN_TYPE_UNSPECIFIED) &&
			slices.ContainsFunc(dns, func(san string) bool { return dnsNameMatch(m.exact, san) }) {
			return true
		}
	}
	return false
}

// verify checks a peer's chain against the current trust bundle and the
// SAN matchers. Envoy does not check the peer's name against the SNI; it
// checks SANs only, and key usages are not enforced.
func (c *common) verify(raw [][]byte) error {
	if len(raw) == 0 {
		return errors.New("tls: peer sent no certificate")
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, b := range raw {
		cert, err := x509.ParseCertificate(b)
		if err != nil {
			return fmt.Errorf("tls: peer certificate %d: %w", i, err)
		}
		certs[i] = cert
	}
	return c.verifyCerts(certs)
}

// verifyCerts is verify for certificates already parsed (those a resumed
// session carries): against the trust bundle, revocation lists and
// subject alt names current now.
func (c *common) verifyCerts(certs []*x509.Certificate) error {
	if len(certs) == 0 {
		return errors.New("tls: peer sent no certificate")
	}
	v := c.roots.value.Load()
	if v == nil || v.roots == nil {
		return errors.New("tls: no trust bundle to verify the peer with")
	}
	inter := x509.NewCertPool()
	for _, ic := range certs[1:] {
		inter.AddCert(ic)
	}
	chains, err := certs[0].Verify(x509.VerifyOptions{Roots: v.roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return fmt.Errorf("tls: peer certificate: %w", err)
	}
	crls := c.crls
	if v.crls != nil {
		// The SDS secret's list wins over the default context's, as
		// Envoy merges a combined validation context.
		crls = v.crls
	}
	if crls != nil {
		if err := crls.check(chains, time.Now()); err != nil {
			return fmt.Errorf("tls: peer certificate: %w", err)
		}
	}
	sans := c.sans
	if len(sans) == 0 && v.validation != nil {
		// A validation context from SDS alone may carry the matchers.
		sans, _ = buildSANs(v.validation, "sds")
	}
	if !sanMatches(sans, certs[0]) {
		return fmt.Errorf("tls: peer certificate SANs %v match none of the configured subject alt names", peerSANs(certs[0]))
	}
	return nil
}

func peerSANs(c *x509.Certificate) []string {
	out := slices.Clone(c.DNSNames)
	for _, u := range c.URIs {
		out = append(out, (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String())
	}
	return out
}

// wait blocks until every secret of c has a value (Envoy keeps a listener
// or cluster warming until its secrets arrive; here the handshake waits).
func (c *common) wait(ctx context.Context) error {
	for _, s := range []*Secret{c.cert, c.roots} {
		if s != nil {
			if err := s.wait(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *common) currentCert() (*tls.Certificate, error) {
	if c.cert == nil {
		return &tls.Certificate{}, nil
	}
	v := c.cert.value.Load()
	if v == nil || v.cert == nil {
		return nil, fmt.Errorf("tls: certificate secret %q not received yet", c.cert.name)
	}
	return v.cert, nil
}

func (c *common) baseConfig() *tls.Config {
	return &tls.Config{
		MinVersion:       c.minVersion,
		MaxVersion:       c.maxVersion,
		CipherSuites:     c.ciphers,
		CurvePreferences: c.curves,
	}
}

// handshake runs h under ctx, closing conn when it fails.
func handshake(ctx context.Context, conn net.Conn, tc *tls.Conn) (*tls.Conn, error) {
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}
