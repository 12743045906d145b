package kube

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/straitmesh/strait/internal/certpem"
	"github.com/straitmesh/strait/internal/mesh"
)

// Gateway credentials in Kubernetes mode: a Gateway server's
// tls.credentialName NAME is a Secret NAME of the gateway workload's
// namespace, read in Istio's formats (pilot/pkg/credentials/kube
// secrets.go: extractKeyAndCert, extractRoot):
//
//   - a generic Secret with cert and key (cacert for MUTUAL), or
//   - a kubernetes.io/tls Secret with tls.crt and tls.key (ca.crt);
//
// the CA certificates of a MUTUAL server come from a Secret NAME-cacert
// (its cacert or ca.crt) when there is one, else from NAME itself
// (GetCaCert), with the revocation list beside them (crl beside cacert,
// ca.crl beside ca.crt: ExtractRoot). Istio's OCSP staple
// (tls.ocsp-staple) is refused: the proxy does not staple.
const (
	genericCert   = "cert"
	genericKey    = "key"
	genericCACert = "cacert"
	genericCRL    = "crl"
	tlsCert       = corev1.TLSCertKey       // tls.crt
	tlsKey        = corev1.TLSPrivateKeyKey // tls.key
	tlsCACert     = "ca.crt"
	caCRL         = "ca.crl"
	ocspStaple    = "tls.ocsp-staple"
	caSuffix      = "-cacert"
)

// keyAndCert returns the certificate chain and private key of s, checked
// to parse and to match.
func keyAndCert(s *corev1.Secret) (cert, key []byte, err error) {
	if len(s.Data[ocspStaple]) > 0 {
		return nil, nil, fmt.Errorf("secret %s/%s: key %s is not supported by Strait's gateways (remove it)", s.Namespace, s.Name, ocspStaple)
	}
	switch {
	case hasKeys(s.Data, genericCert, genericKey):
		cert, key = s.Data[genericCert], s.Data[genericKey]
	case hasKeys(s.Data, tlsCert, tlsKey):
		cert, key = s.Data[tlsCert], s.Data[tlsKey]
	default:
		return nil, nil, fmt.Errorf("secret %s/%s has neither %s and %s (a kubernetes.io/tls Secret) nor %s and %s (a generic Secret); found keys %s",
			s.Namespace, s.Name, tlsCert, tlsKey, genericCert, genericKey, dataKeys(s))
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		return nil, nil, fmt.Errorf("secret %s/%s: the certificate and private key do not make a key pair: %w", s.Namespace, s.Name, err)
	}
	return cert, key, nil
}

// caCerts returns the CA certificates of s (cacert, else ca.crt), checked
// to be PEM certificates, and the revocation list beside them (crl,
// ca.crl; nil when there is none), checked to parse.
func caCerts(s *corev1.Secret) (ca, crl []byte, err error) {
	crlKey := genericCRL
	switch {
	case hasKeys(s.Data, genericCACert):
		ca = s.Data[genericCACert]
	case hasKeys(s.Data, tlsCACert):
		ca, crlKey = s.Data[tlsCACert], caCRL
	default:
		return nil, nil, fmt.Errorf("secret %s/%s has no CA certificates (%s or %s), which a MUTUAL server needs (or put them in a Secret %s%s); found keys %s",
			s.Namespace, s.Name, tlsCACert, genericCACert, strings.TrimSuffix(s.Name, caSuffix), caSuffix, dataKeys(s))
	}
	if err := mesh.CheckPEMCertificates(ca); err != nil {
		return nil, nil, fmt.Errorf("secret %s/%s: CA certificates: %w", s.Namespace, s.Name, err)
	}
	crl = s.Data[crlKey]
	if len(crl) > 0 {
		if _, err := certpem.ParseCRLs(crl); err != nil {
			return nil, nil, fmt.Errorf("secret %s/%s: %s: %w", s.Namespace, s.Name, crlKey, err)
		}
	}
	return ca, crl, nil
}

func hasKeys(data map[string][]byte, keys ...string) bool {
	for _, k := range keys {
		if len(data[k]) == 0 {
			return false
		}
	}
	return true
}

func dataKeys(s *corev1.Secret) string {
	if len(s.Data) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(s.Data))
	for k := range s.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}
