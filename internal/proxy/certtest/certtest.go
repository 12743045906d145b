// Package certtest issues the certificates of TLS tests: a CA, a server
// certificate and a client certificate (ECDSA P-256, valid for an hour),
// as the tests of the client-certificate policies (XFCC) and the HCM's
// mutual TLS need them.
package certtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"testing"
	"time"
)

// Certs is a CA, a server certificate and a client certificate. Server
// and Client carry the chain (leaf, CA) and their keys; ServerX and
// ClientX are the parsed leaves.
type Certs struct {
	CAPEM            []byte
	CA               *x509.Certificate
	Server, Client   tls.Certificate
	ServerX, ClientX *x509.Certificate
}

// Issue makes a CA and issues the server certificate with serverURI as
// its URI SAN (and 127.0.0.1), and the client's from the template client.
func Issue(t testing.TB, serverURI string, client *x509.Certificate) *Certs {
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
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, Subject: pkix.Name{CommonName: "xfcc ca"}}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(serial int64, tmpl *x509.Certificate) (tls.Certificate, *x509.Certificate) {
		k := key()
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		x, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: k}, x
	}
	out := &Certs{CA: ca, CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	out.Server, out.ServerX = leaf(2, &x509.Certificate{URIs: []*url.URL{MustURL(t, serverURI)}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	out.Client, out.ClientX = leaf(3, client)
	return out
}

// MustURL parses s or fails the test.
func MustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
