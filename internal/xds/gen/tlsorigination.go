package gen

import (
	"cmp"
	"strings"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	networking "istio.io/api/networking/v1alpha3"
)

// TLS origination: a DestinationRule's tls SIMPLE or MUTUAL makes the
// client sidecar open TLS to the destination itself, as Istio's
// constructUpstreamTLS (pilot/pkg/networking/core/cluster_tls.go) does.
// The files the rule names (clientCertificate, privateKey,
// caCertificates) are paths on the sidecar's host; the proxy never reads
// them: they are SDS resources named as Istio names them
// (pkg/security SdsCertificateConfig), "file-cert:CERT~KEY" and
// "file-root:CA", which the agent reads, serves and pushes again when
// they change. Without caCertificates the host's trust bundle
// ("file-root:system") verifies the server, as Istio does by default;
// insecureSkipVerify verifies nothing. caCrl is a revocation list file
// the proxy reads itself (default_validation_context.crl), as in Istio.
//
// Where Istio leaves sni empty and sets auto_sni and auto_san_validation
// on the cluster (the SNI and the expected SAN taken from each request's
// Host), Strait sets the destination's host name as the SNI and, when the
// rule names no subjectAltNames, as the expected SAN: the same names when
// the application calls the service by its host name, which is how TLS
// origination is used.

const (
	fileCertPrefix = "file-cert:"
	fileRootPrefix = "file-root:"
	fileRootSystem = fileRootPrefix + "system"
)

// originationSocket is the upstream TLS transport socket of a SIMPLE or
// MUTUAL tls for a cluster of host. The config loader has checked that
// MUTUAL names a certificate and a key (istioconfig/validate
// destinationrule.go).
func originationSocket(t *networking.ClientTLSSettings, host string, c *cluster.Cluster) *core.TransportSocket {
	common := &tlsv3.CommonTlsContext{
		TlsParams: &tlsv3.TlsParameters{
			TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2,
			TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3,
		},
	}
	if t.GetMode() == networking.ClientTLSSettings_MUTUAL {
		common.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{
			sdsSecret(fileCertPrefix + t.GetClientCertificate() + "~" + t.GetPrivateKey()),
		}
	}
	concrete := host != "" && !strings.HasPrefix(host, "*")
	if t.GetInsecureSkipVerify().GetValue() {
		common.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{}}
	} else {
		sans := t.GetSubjectAltNames()
		if len(sans) == 0 && t.GetSni() == "" && concrete {
			sans = []string{host}
		}
		var exact []*matcher.StringMatcher
		for _, n := range sans {
			exact = append(exact, &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: n}})
		}
		def := &tlsv3.CertificateValidationContext{MatchSubjectAltNames: exact}
		if crl := t.GetCaCrl(); crl != "" {
			// A file the proxy reads itself, as Istio emits it.
			def.Crl = &core.DataSource{Specifier: &core.DataSource_Filename{Filename: crl}}
		}
		common.ValidationContextType = &tlsv3.CommonTlsContext_CombinedValidationContext{
			CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         def,
				ValidationContextSdsSecretConfig: sdsSecret(cmp.Or(prefixed(fileRootPrefix, t.GetCaCertificates()), fileRootSystem)),
			},
		}
	}
	if isHTTP2Cluster(c) {
		common.AlpnProtocols = []string{"h2"} // Istio's util.ALPNH2Only
	}
	sni := t.GetSni()
	if sni == "" && concrete {
		sni = host
	}
	return &core.TransportSocket{
		Name: tlsSocketName,
		ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: mustAny(&tlsv3.UpstreamTlsContext{
			CommonTlsContext: common,
			Sni:              sni,
		})},
	}
}

// prefixed is prefix+s, or "" for an empty s.
func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

// isHTTP2Cluster reports whether c speaks HTTP/2 to its endpoints (the
// port's protocol or the DestinationRule's h2UpgradePolicy set it).
func isHTTP2Cluster(c *cluster.Cluster) bool {
	a := c.GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey]
	if a == nil {
		return false
	}
	var o upstreamhttp.HttpProtocolOptions
	if err := a.UnmarshalTo(&o); err != nil {
		return false
	}
	return o.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil
}
