package certpem

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
)

// testCRL is a DER revocation list, numbered n, that revokes serial 7,
// signed by a fresh self-signed CA.
func testCRL(t *testing.T, n int64) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	crl, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{
		Number:                    big.NewInt(n),
		ThisUpdate:                time.Now(),
		NextUpdate:                time.Now().Add(time.Hour),
		RevokedCertificateEntries: []x509.RevocationListEntry{{SerialNumber: big.NewInt(7), RevocationTime: time.Now()}},
	}, ca, key)
	if err != nil {
		t.Fatal(err)
	}
	return crl
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// TestParseCRLs: PEM lists (other blocks skipped) or one DER list parse,
// in order; an empty file, garbage, a PEM file with no CRL and a broken
// CRL block are errors that say which.
func TestParseCRLs(t *testing.T) {
	one, two := testCRL(t, 1), testCRL(t, 2)
	for _, tc := range []struct {
		name    string
		in      []byte
		want    []int64 // the lists' numbers, in order
		wantErr string
	}{
		{name: "one PEM", in: pemBlock("X509 CRL", one), want: []int64{1}},
		{name: "two PEM", in: append(pemBlock("X509 CRL", one), pemBlock("X509 CRL", two)...), want: []int64{1, 2}},
		{name: "other blocks skipped", in: append(pemBlock("CERTIFICATE", []byte("x")), pemBlock("X509 CRL", two)...), want: []int64{2}},
		{name: "DER", in: one, want: []int64{1}},
		{name: "empty", in: nil, wantErr: "empty revocation list"},
		{name: "garbage", in: []byte("not a crl"), wantErr: "not a DER CRL"},
		{name: "PEM without CRL", in: pemBlock("CERTIFICATE", []byte("x")), wantErr: "no PEM \"X509 CRL\" block"},
		{name: "broken PEM CRL", in: append(pemBlock("X509 CRL", one), pemBlock("X509 CRL", []byte("broken"))...), wantErr: "PEM block 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCRLs(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d lists, want %d", len(got), len(tc.want))
			}
			for i, l := range got {
				if l.Number.Int64() != tc.want[i] {
					t.Errorf("list %d has number %v, want %d", i, l.Number, tc.want[i])
				}
				if len(l.RevokedCertificateEntries) != 1 || l.RevokedCertificateEntries[0].SerialNumber.Int64() != 7 {
					t.Errorf("list %d revokes %v, want serial 7", i, l.RevokedCertificateEntries)
				}
			}
		})
	}
}
