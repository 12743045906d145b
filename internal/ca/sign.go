package ca

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"time"
)

// This file is workload certificate signing: a CSR checked against the
// caller's identity and turned into a certificate whose only SAN is that
// identity, or a SignError saying whose fault the refusal is.

// SignRequest is one certificate to sign.
type SignRequest struct {
	// CSR is the PEM (or DER) certificate signing request.
	CSR []byte
	// Identity is the caller's authenticated identity. If the CSR names URI
	// SANs they must all be this identity; the certificate carries it alone.
	Identity Identity
	// TTL is the requested lifetime; 0 means the default.
	TTL time.Duration
}

// SignError is a refusal. Kind says which: the caller's fault
// (KindInvalidRequest, KindPermissionDenied) or the CA's.
type SignError struct {
	Kind Kind
	Err  error
}

// Kind classifies a SignError (the label of citadel_server_csr_sign_err_count).
type Kind string

// Kinds of refusal.
const (
	KindInvalidRequest   Kind = "invalid_request"   // a malformed CSR or lifetime
	KindPermissionDenied Kind = "permission_denied" // the CSR asks for another identity
	KindSigning          Kind = "signing"           // the CA itself failed
)

func (e *SignError) Error() string { return e.Err.Error() }
func (e *SignError) Unwrap() error { return e.Err }

func refuse(kind Kind, format string, args ...any) error {
	return &SignError{Kind: kind, Err: fmt.Errorf(format, args...)}
}

// Sign signs a workload certificate and returns it with the chain a
// workload needs, as Istio's CreateCertificate answers: the leaf, then each
// certificate of cert-chain.pem, then the trust bundle (all roots) as the
// last element.
func (c *CA) Sign(req SignRequest) (chain []string, err error) {
	if req.Identity.TrustDomain != c.opts.TrustDomain {
		return nil, refuse(KindPermissionDenied, "identity %s is not in this CA's trust domain %q", req.Identity, c.opts.TrustDomain)
	}
	if err := req.Identity.Validate(); err != nil {
		return nil, refuse(KindInvalidRequest, "%w", err)
	}
	ttl := req.TTL
	switch {
	case ttl < 0:
		return nil, refuse(KindInvalidRequest, "requested lifetime %v is negative", ttl)
	case ttl == 0:
		ttl = c.opts.DefaultTTL
	case ttl > c.opts.MaxTTL:
		return nil, refuse(KindInvalidRequest, "requested lifetime %v is longer than the maximum %v", ttl, c.opts.MaxTTL)
	}
	csr, err := parseCSR(req.CSR)
	if err != nil {
		return nil, refuse(KindInvalidRequest, "%w", err)
	}
	if len(csr.DNSNames) > 0 || len(csr.IPAddresses) > 0 || len(csr.EmailAddresses) > 0 {
		return nil, refuse(KindInvalidRequest, "the CSR names DNS, IP or email SANs (%v %v %v); a workload certificate carries only its SPIFFE ID",
			csr.DNSNames, csr.IPAddresses, csr.EmailAddresses)
	}
	for _, u := range csr.URIs {
		if u.String() == req.Identity.String() {
			continue
		}
		if id, err := ParseIdentity(u.String()); err == nil && id.Namespace == req.Identity.Namespace && id.ServiceAccount == req.Identity.ServiceAccount {
			// The workload's own identity in another trust domain: its
			// agent was told a trust domain other than the mesh's.
			return nil, refuse(KindPermissionDenied, "the CSR asks for %s but the caller is %s: the agent's trust domain %q is not the mesh's %q (set TRUST_DOMAIN=%s in the agent's environment, as the injector does from the mesh config)",
				u, req.Identity, id.TrustDomain, req.Identity.TrustDomain, req.Identity.TrustDomain)
		}
		return nil, refuse(KindPermissionDenied, "the CSR asks for %s but the caller is %s", u, req.Identity)
	}
	kc := c.current()
	now := c.opts.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(ttl),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		URIs:                  []*url.URL{req.Identity.URL()},
	}
	if tmpl.NotAfter.After(kc.cert.NotAfter) {
		// A certificate cannot outlive its issuer and still verify.
		tmpl.NotAfter = kc.cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, kc.cert, csr.PublicKey, kc.signer)
	if err != nil {
		return nil, refuse(KindSigning, "sign: %w", err)
	}
	chain = []string{string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
	for _, ic := range kc.chain {
		chain = append(chain, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ic.Raw})))
	}
	return append(chain, string(kc.rootsPEM)), nil
}

func randomSerial() *big.Int {
	// 128 random bits, as RFC 5280 allows (at most 20 octets, positive).
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // crypto/rand does not fail on Linux
	}
	return n.Add(n, big.NewInt(1))
}
