package tlsconf

import (
	"slices"
	"strings"
	"testing"

	xdscore "github.com/cncf/xds/go/xds/core/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func adsConfig(name string) *tlsv3.SdsSecretConfig {
	return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		ResourceApiVersion:    corev3.ApiVersion_V3,
	}}
}

// TestGatewayCredentialOverADS: a server TLS context as straitd
// generates it for a MUTUAL Gateway server with a credentialName in
// Kubernetes mode (Istio's SDSAdsConfig: kubernetes://NAME and
// kubernetes://NAME-cacert with sds_config {ads: {}}) asks the ADS
// client for both names (ADSSecrets, whose channel says when they
// change) and, once a response brings them (ApplySecrets), serves a
// client whose certificate the CA secret verifies; a response with a
// secret that does not parse is rejected and changes nothing.
func TestGatewayCredentialOverADS(t *testing.T) {
	ca := newCA(t)
	prov := NewProvider(ProviderOptions{ADS: true})
	t.Cleanup(prov.Close)
	names, changed := prov.ADSSecrets()
	if len(names) != 0 {
		t.Fatalf("names %v before any TLS context", names)
	}
	srv, err := NewServer(socket(t, &tlsv3.DownstreamTlsContext{
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{adsConfig("kubernetes://cred")},
			ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         &tlsv3.CertificateValidationContext{},
				ValidationContextSdsSecretConfig: adsConfig("kubernetes://cred-cacert"),
			}},
		},
		RequireClientCertificate: wrapperspb.Bool(true),
	}), prov)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("the subscription did not say its names changed")
	}
	names, _ = prov.ADSSecrets()
	if want := []string{"kubernetes://cred", "kubernetes://cred-cacert"}; !slices.Equal(names, want) {
		t.Fatalf("names %v, want %v", names, want)
	}
	inline := func(b []byte) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
	}
	c, k, _ := ca.issue(t, serverID)
	cert := &tlsv3.Secret{Name: "kubernetes://cred", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inline(c), PrivateKey: inline(k)}}}
	root := &tlsv3.Secret{Name: "kubernetes://cred-cacert", Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
		TrustedCa: inline(ca.pem)}}}
	bad := &tlsv3.Secret{Name: "kubernetes://cred", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inline(c), PrivateKey: inline([]byte("not a key"))}}}
	if err := prov.ApplySecrets("v0", []*tlsv3.Secret{root, bad}); err == nil || !strings.Contains(err.Error(), `secret "kubernetes://cred".tls_certificate`) {
		t.Fatalf("a secret with a bad key: %v, want a rejection naming it", err)
	}
	if v := prov.ads["kubernetes://cred-cacert"].value.Load(); v != nil {
		t.Fatal("a rejected response stored its other secret")
	}
	if err := prov.ApplySecrets("v1", []*tlsv3.Secret{cert, root}); err != nil {
		t.Fatal(err)
	}

	cliSDS := startSDS(t)
	c, k, _ = ca.issue(t, clientID)
	cliSDS.set(c, k, ca.pem)
	cl, err := NewClient(socket(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: istioCommon(nil, serverID)}), provider(t, cliSDS))
	if err != nil {
		t.Fatal(err)
	}
	p := &pair{client: cl, server: srv}
	tc, cerr, serr := p.dial(t)
	if cerr != nil || serr != nil {
		t.Fatalf("handshake: client %v, server %v", cerr, serr)
	}
	echo(t, tc, "over ads")

	// Without a client certificate the server refuses.
	noCert, err := NewClient(socket(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{TrustedCa: inline(ca.pem)}},
	}}), prov)
	if err != nil {
		t.Fatal(err)
	}
	if _, cerr, serr := (&pair{client: noCert, server: srv}).dial(t); cerr == nil && serr == nil {
		t.Fatal("the MUTUAL server accepted a client without a certificate")
	}
}

// TestADSSecretRefused: without an ADS stream an ADS-sourced secret is
// refused naming the field; an ADS config source with a field this proxy
// does not implement too.
func TestADSSecretRefused(t *testing.T) {
	prov := NewProvider(ProviderOptions{})
	defer prov.Close()
	ctx := &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{adsConfig("kubernetes://cred")}}}
	if _, err := NewServer(socket(t, ctx), prov); err == nil || !strings.Contains(err.Error(), "sds_config.ads: this proxy has no ADS stream") {
		t.Errorf("no ADS stream: %v", err)
	}
	prov2 := NewProvider(ProviderOptions{ADS: true})
	defer prov2.Close()
	cfg := adsConfig("kubernetes://cred")
	cfg.SdsConfig.Authorities = []*xdscore.Authority{{Name: "x"}}
	ctx.CommonTlsContext.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{cfg}
	if _, err := NewServer(socket(t, ctx), prov2); err == nil || !strings.Contains(err.Error(), "authorities") {
		t.Errorf("authorities: %v", err)
	}
}
