package support

// gatewaySupport is the honour-or-refuse table of Gateway (see
// fieldSupport): straitd builds, for a proxy of type router whose workload
// labels a Gateway's selector matches, Istio's gateway listeners
// (0.0.0.0_PORT), routes (http.PORT, https.PORT.SERVER.GATEWAY.NS) and
// filter chains (internal/xds/gen/gateway.go). Certificates come from
// files on the gateway (serverCertificate, privateKey, caCertificates),
// served by the gateway's agent over SDS as Istio's file-cert:/file-root:
// resources; credentialName NAME is Istio's SDS resource
// kubernetes://NAME, which straitd serves over ADS from the Secret NAME
// in Kubernetes mode (internal/registry/kube secrets.go) and the
// gateway's agent from its credentials directory in file mode
// (NAME/tls.crt, tls.key, ca.crt: a Kubernetes TLS Secret's keys).
// validateGateway refuses the protocols and field combinations
// that are not built.
var gatewaySupport = map[string]Support{
	"servers":                                       Honoured,
	"servers.port":                                  Honoured,
	"servers.port.number":                           Honoured,
	"servers.port.protocol":                         Honoured,
	"servers.port.name":                             Honoured,
	"servers.port.targetPort":                       Refused,
	"servers.bind":                                  Refused,
	"servers.hosts":                                 Honoured,
	"servers.tls":                                   Honoured,
	"servers.tls.httpsRedirect":                     Honoured,
	"servers.tls.mode":                              Honoured,
	"servers.tls.mode=SIMPLE":                       Honoured,
	"servers.tls.mode=MUTUAL":                       Honoured,
	"servers.tls.mode=AUTO_PASSTHROUGH":             Refused,
	"servers.tls.mode=ISTIO_MUTUAL":                 Honoured,
	"servers.tls.mode=OPTIONAL_MUTUAL":              Refused,
	"servers.tls.serverCertificate":                 Honoured,
	"servers.tls.privateKey":                        Honoured,
	"servers.tls.caCertificates":                    Honoured,
	"servers.tls.caCrl":                             Refused,
	"servers.tls.credentialName":                    Honoured,
	"servers.tls.credentialNames":                   Refused,
	"servers.tls.caCertCredentialName":              Refused,
	"servers.tls.tlsCertificates":                   Refused,
	"servers.tls.tlsCertificates.serverCertificate": Refused,
	"servers.tls.tlsCertificates.privateKey":        Refused,
	"servers.tls.tlsCertificates.caCertificates":    Refused,
	"servers.tls.subjectAltNames":                   Refused,
	"servers.tls.verifyCertificateSpki":             Refused,
	"servers.tls.verifyCertificateHash":             Refused,
	"servers.tls.minProtocolVersion":                Refused,
	"servers.tls.maxProtocolVersion":                Refused,
	"servers.tls.cipherSuites":                      Refused,
	"servers.tls.minProtocolVersion=TLSV1_0":        Refused,
	"servers.tls.minProtocolVersion=TLSV1_1":        Refused,
	"servers.tls.minProtocolVersion=TLSV1_2":        Refused,
	"servers.tls.minProtocolVersion=TLSV1_3":        Refused,
	"servers.tls.maxProtocolVersion=TLSV1_0":        Refused,
	"servers.tls.maxProtocolVersion=TLSV1_1":        Refused,
	"servers.tls.maxProtocolVersion=TLSV1_2":        Refused,
	"servers.tls.maxProtocolVersion=TLSV1_3":        Refused,
	"servers.tls.insecureSkipVerify":                Refused,
	"servers.tls.ecdhCurves":                        Refused,
	"servers.tls.alpnProtocols":                     Refused,
	"servers.defaultEndpoint":                       Refused,
	"servers.name":                                  Honoured,
	"selector":                                      Honoured,
}
