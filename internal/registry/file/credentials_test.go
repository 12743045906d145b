package file

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/proxypush"
)

// selfSigned returns a PEM certificate and its PKCS#8 key.
func selfSigned(t *testing.T) (cert, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "api.example.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// testCRL is a DER revocation list signed by a fresh CA.
func testCRL(t *testing.T) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "client CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	crl, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: time.Now(), NextUpdate: time.Now().Add(time.Hour)}, ca, k)
	if err != nil {
		t.Fatal(err)
	}
	return crl
}

// writeCredential lays files out as CREDENTIALS/NS/NAME/FILE.
func writeCredential(t *testing.T, root, ns, name string, files map[string][]byte) {
	t.Helper()
	dir := filepath.Join(root, ns, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCredentialDirCheck(t *testing.T) {
	root := t.TempDir()
	cert, key := selfSigned(t)
	otherCert, _ := selfSigned(t)
	writeCredential(t, root, "ingress", "good", map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": cert})
	writeCredential(t, root, "ingress", "noca", map[string][]byte{"tls.crt": cert, "tls.key": key})
	writeCredential(t, root, "ingress", "split", map[string][]byte{"tls.crt": cert, "tls.key": key})
	writeCredential(t, root, "ingress", "split-cacert", map[string][]byte{"ca.crt": cert})
	writeCredential(t, root, "ingress", "garbage", map[string][]byte{"tls.crt": []byte("not PEM"), "tls.key": key})
	writeCredential(t, root, "ingress", "mismatch", map[string][]byte{"tls.crt": otherCert, "tls.key": key})
	writeCredential(t, root, "ingress", "badca", map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": key})
	writeCredential(t, root, "ingress", "crl", map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": cert, "ca.crl": testCRL(t)})
	writeCredential(t, root, "ingress", "badcrl", map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": cert, "ca.crl": []byte("not a CRL")})
	writeCredential(t, root, "ingress", "splitcrl", map[string][]byte{"tls.crt": cert, "tls.key": key})
	writeCredential(t, root, "ingress", "splitcrl-cacert", map[string][]byte{"ca.crt": cert, "ca.crl": []byte("not a CRL")})
	d := credentialDir(root)
	for _, tc := range []struct {
		ns, name string
		mutual   bool
		wantErr  string // "" for none
	}{
		{"ingress", "good", false, ""},
		{"ingress", "good", true, ""},
		{"ingress", "split", true, ""}, // NAME-cacert/ca.crt
		{"ingress", "noca", false, ""},
		{"ingress", "noca", true, "MUTUAL needs CA certificates"},
		{"other", "good", false, "no certificate"}, // the gateway's namespace only
		{"ingress", "absent", false, "no certificate"},
		{"ingress", "garbage", false, "tls.crt and tls.key"},
		{"ingress", "mismatch", false, "private key does not match public key"},
		{"ingress", "badca", true, `PEM block "PRIVATE KEY", want CERTIFICATE`},
		{"ingress", "../ingress", false, "is not a Secret's name"},
		{"ingress", "crl", true, ""},
		{"ingress", "badcrl", false, ""}, // SIMPLE serves no CA
		{"ingress", "badcrl", true, "ca.crl of badcrl: no PEM"},
		{"ingress", "splitcrl", true, "ca.crl of splitcrl-cacert"},
	} {
		err := d.Check(tc.ns, tc.name, tc.mutual)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s/%s mutual=%t: %v", tc.ns, tc.name, tc.mutual, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s/%s mutual=%t: error %v, want one with %q", tc.ns, tc.name, tc.mutual, err, tc.wantErr)
		}
	}
}

const credentialMesh = `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: ingressgateway, namespace: ingress}
spec:
  address: 10.92.0.10
  labels: {istio: ingressgateway}
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: ingress}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 443, name: https, protocol: HTTPS}
    hosts: [api.example.com]
    tls: {mode: SIMPLE, credentialName: api-cert}
`

// TestCredentialAppears: a Gateway names a credential that is not there;
// once its files are written, Run's recheck publishes a snapshot in which
// it can be served, and pushes.
func TestCredentialAppears(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "mesh.yaml"), credentialMesh)
	creds := filepath.Join(dir, "credentials")
	r, err := New(Options{Dir: dir, CredentialsDir: creds, CredentialPoll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := r.Snapshot().Configs.List(istioconfig.KindGateway)[0].Gateway().GetServers()[0]
	if err := r.Snapshot().GatewayCredentialError("ingress", srv); err == nil || !strings.Contains(err.Error(), "no certificate") {
		t.Fatalf("credential error %v, want no certificate", err)
	}
	pushes := make(chan *proxypush.PushRequest, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, func(p *proxypush.PushRequest) { pushes <- p }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	expectNoPush(t, pushes)
	cert, key := selfSigned(t)
	writeCredential(t, creds, "ingress", "api-cert", map[string][]byte{"tls.crt": cert, "tls.key": key})
	if p := waitPush(t, pushes); !p.Full {
		t.Errorf("push %+v, want a full push", p)
	}
	if err := r.Snapshot().GatewayCredentialError("ingress", srv); err != nil {
		t.Errorf("after the credential was written: %v", err)
	}
	expectNoPush(t, pushes)
}
