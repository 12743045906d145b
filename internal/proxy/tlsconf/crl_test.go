package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

type crlCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCRLCA(t *testing.T, name string) crlCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return crlCA{cert, key}
}

func (ca crlCA) leaf(t *testing.T, serial int64) *x509.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c
}

// crl returns a DER CRL revoking serials, valid until next.
func (ca crlCA) crl(t *testing.T, next time.Time, serials ...int64) []byte {
	t.Helper()
	var revoked []x509.RevocationListEntry
	for _, s := range serials {
		revoked = append(revoked, x509.RevocationListEntry{SerialNumber: big.NewInt(s), RevocationTime: time.Now()})
	}
	der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: time.Now().Add(-time.Minute),
		NextUpdate: next, RevokedCertificateEntries: revoked}, ca.cert, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func crlContext(data []byte) *tlsv3.CertificateValidationContext {
	return &tlsv3.CertificateValidationContext{Crl: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: data}}}
}

// TestCRL: a revoked leaf is refused, a listed-but-other serial passes; a
// chain without its issuer's CRL, or with an expired one, is refused;
// PEM and DER both parse.
func TestCRL(t *testing.T) {
	ca, other := newCRLCA(t, "ca"), newCRLCA(t, "other")
	good, bad := ca.leaf(t, 10), ca.leaf(t, 11)
	later := time.Now().Add(time.Hour)
	pemCRL := pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: ca.crl(t, later, 11)})
	set, err := parseCRLs(crlContext(pemCRL), "v")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := set.check([][]*x509.Certificate{{good, ca.cert}}, now); err != nil {
		t.Errorf("good leaf: %v", err)
	}
	if err := set.check([][]*x509.Certificate{{bad, ca.cert}}, now); err == nil || !strings.Contains(err.Error(), "is revoked") {
		t.Errorf("revoked leaf: %v", err)
	}
	if err := set.check([][]*x509.Certificate{{good, ca.cert}}, later.Add(time.Minute)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired CRL: %v", err)
	}
	// A CRL from another CA does not cover ca's leaves.
	otherSet, err := parseCRLs(crlContext(other.crl(t, later)), "v") // DER
	if err != nil {
		t.Fatal(err)
	}
	if err := otherSet.check([][]*x509.Certificate{{good, ca.cert}}, now); err == nil || !strings.Contains(err.Error(), "no CRL from") {
		t.Errorf("no CRL of the issuer: %v", err)
	}
	if _, err := parseCRLs(crlContext([]byte("junk")), "v"); err == nil {
		t.Error("junk parsed as a CRL")
	}
	if set, err := parseCRLs(&tlsv3.CertificateValidationContext{}, "v"); set != nil || err != nil {
		t.Errorf("no crl: %v %v", set, err)
	}
}

// TestCRLInContextsAndSecrets: a crl in the TLS context's own
// validation context is used; one in an SDS secret (a Gateway
// credential's ca.crl) too, and wins over the context's, as Envoy merges
// a combined validation context: a leaf it revokes is refused at
// verification; a crl without a trust bundle is refused in both.
func TestCRLInContextsAndSecrets(t *testing.T) {
	ca := newCRLCA(t, "ca")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
	vc := crlContext(ca.crl(t, time.Now().Add(time.Hour)))
	vc.TrustedCa = &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: caPEM}}
	c, err := buildCommon(&tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc}}, nil, "ctx")
	if err != nil || len(c.crls) != 1 {
		t.Fatalf("static crl: %v %v", c, err)
	}

	good, revoked := ca.leaf(t, 20), ca.leaf(t, 21)
	sdsVC := crlContext(ca.crl(t, time.Now().Add(time.Hour), 21))
	sdsVC.TrustedCa = vc.TrustedCa
	v, err := parseSecret(&tlsv3.Secret{Name: "kubernetes://cred-cacert", Type: &tlsv3.Secret_ValidationContext{ValidationContext: sdsVC}})
	if err != nil || len(v.crls) != 1 {
		t.Fatalf("crl in an SDS secret: %v %v", v, err)
	}
	roots := staticSecret("kubernetes://cred-cacert", v)
	// The context's own list revokes nothing; the secret's revokes 21.
	sc := &common{roots: roots, crls: c.crls}
	if err := sc.verify([][]byte{good.Raw}); err != nil {
		t.Errorf("good leaf: %v", err)
	}
	if err := sc.verify([][]byte{revoked.Raw}); err == nil || !strings.Contains(err.Error(), "is revoked") {
		t.Errorf("leaf revoked by the secret's crl: %v", err)
	}
	if _, err := parseSecret(&tlsv3.Secret{Name: "s", Type: &tlsv3.Secret_ValidationContext{ValidationContext: crlContext(ca.crl(t, time.Now().Add(time.Hour)))}}); err == nil ||
		!strings.Contains(err.Error(), "crl needs a trust bundle") {
		t.Errorf("crl without roots in an SDS secret: %v", err)
	}
	noRoots := crlContext(ca.crl(t, time.Now().Add(time.Hour)))
	if _, err := buildCommon(&tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: noRoots}}, nil, "ctx"); err == nil || !strings.Contains(err.Error(), "crl needs a trust bundle") {
		t.Errorf("crl without roots: %v", err)
	}
}
