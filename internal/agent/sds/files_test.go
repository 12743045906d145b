package sds

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

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"github.com/straitmesh/strait/internal/testreq"
	"github.com/straitmesh/strait/internal/xdsapi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// selfSigned returns a PEM certificate for cn and its PEM key.
func selfSigned(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		DNSNames: []string{cn}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})
}

// startFileSDS serves SDS with no workload certificate (an agent whose
// certificates are off), polling files every 50 ms.
func startFileSDS(t *testing.T) secretv3.SecretDiscoveryServiceClient {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "socket")
	lis, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(ServerOptions{FilePoll: 50 * time.Millisecond})
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return secretv3.NewSecretDiscoveryServiceClient(cc)
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSDSServesFiles serves a DestinationRule's client certificate and CA
// as Istio names them (file-cert:CERT~KEY, file-root:CA) from an agent
// without a workload certificate, pushes a rewritten certificate on the
// same stream, and holds back a certificate that does not match its key
// (logged, not sent) until the files agree again.
func TestSDSServesFiles(t *testing.T) {
	client := startFileSDS(t)
	dir := t.TempDir()
	certPath, keyPath, caPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "ca.pem")
	cert1, key1 := selfSigned(t, "client-1")
	ca, _ := selfSigned(t, "ca")
	writeFile(t, certPath, cert1)
	writeFile(t, keyPath, key1)
	writeFile(t, caPath, ca)
	certName, rootName := "file-cert:"+certPath+"~"+keyPath, "file-root:"+caPath

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := client.StreamSecrets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{certName, rootName}
	if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: xdsapi.SecretType, ResourceNames: names}); err != nil {
		t.Fatal(err)
	}
	first := recv(t, stream)
	got := decode(t, first)
	if string(got[certName].GetTlsCertificate().GetCertificateChain().GetInlineBytes()) != string(cert1) ||
		string(got[certName].GetTlsCertificate().GetPrivateKey().GetInlineBytes()) != string(key1) {
		t.Fatalf("%s: not the files' certificate and key: %v", certName, got[certName])
	}
	if string(got[rootName].GetValidationContext().GetTrustedCa().GetInlineBytes()) != string(ca) {
		t.Fatalf("%s: not the CA file: %v", rootName, got[rootName])
	}
	if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: xdsapi.SecretType, ResourceNames: names, VersionInfo: first.VersionInfo, ResponseNonce: first.Nonce}); err != nil {
		t.Fatal(err)
	}

	// A certificate without its key yet: nothing is sent. Then the key: the
	// new pair is pushed.
	cert2, key2 := selfSigned(t, "client-2")
	writeFile(t, certPath, cert2)
	time.Sleep(200 * time.Millisecond) // several polls with a mismatched pair
	writeFile(t, keyPath, key2)
	second := recv(t, stream)
	if second.VersionInfo == first.VersionInfo {
		t.Fatalf("push kept version %s", second.VersionInfo)
	}
	if c := decode(t, second)[certName].GetTlsCertificate(); string(c.GetCertificateChain().GetInlineBytes()) != string(cert2) ||
		string(c.GetPrivateKey().GetInlineBytes()) != string(key2) {
		t.Fatalf("pushed %v, want the rewritten pair", c)
	}
}

// TestSDSFileRefusals: malformed file names, a missing file on a single
// fetch, and the workload certificate on an agent that has none are
// refused with a message naming the resource.
func TestSDSFileRefusals(t *testing.T) {
	client := startFileSDS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		code codes.Code
		want string
	}{
		{"file-cert:/only-a-cert.pem", codes.InvalidArgument, "CERT_PATH~KEY_PATH"},
		{"file-cert:/a~/b~/c", codes.InvalidArgument, "CERT_PATH~KEY_PATH"},
		{"file-root:", codes.InvalidArgument, "CA_PATH"},
		{"file-root:/a~/b", codes.InvalidArgument, "CA_PATH"},
		{"kubernetes://secret", codes.InvalidArgument, "no credentials directory"},
		{"sds://other", codes.InvalidArgument, "not served by strait-agent"},
		{"default", codes.InvalidArgument, "no workload certificate"},
		{"ROOTCA", codes.InvalidArgument, "no workload certificate"},
		{"file-root:/does/not/exist.pem", codes.Unavailable, "exist.pem"},
	} {
		_, err := client.FetchSecrets(ctx, &discovery.DiscoveryRequest{ResourceNames: []string{tc.name}})
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %s naming %q", tc.name, err, tc.code, tc.want)
		}
	}
}

func TestParseFileResource(t *testing.T) {
	for _, tc := range []struct {
		name string
		want fileResource
		ok   bool
		err  bool
	}{
		{"file-cert:/c.pem~/k.pem", fileResource{cert: "/c.pem", key: "/k.pem"}, true, false},
		{"file-root:/ca.pem", fileResource{root: "/ca.pem"}, true, false},
		{"file-root:system", fileResource{root: "system"}, true, false},
		{"file-cert:~/k.pem", fileResource{}, true, true},
		{"file-cert:/c.pem~", fileResource{}, true, true},
		{"default", fileResource{}, false, false},
		{"file-rootx", fileResource{}, false, false},
	} {
		got, ok, err := parseFileResource(tc.name)
		if got != tc.want || ok != tc.ok || (err != nil) != tc.err {
			t.Errorf("%s: %+v %v %v, want %+v %v err=%v", tc.name, got, ok, err, tc.want, tc.ok, tc.err)
		}
	}
}

// TestSystemRoot: file-root:system is the host's trust bundle.
func TestSystemRoot(t *testing.T) {
	path, err := systemBundle()
	if err != nil {
		testreq.Missing(t, "this host has no system trust bundle (apt-get install ca-certificates): %v", err)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sec, _, err := fileResource{root: "system"}.read("file-root:system")
	if err != nil {
		t.Fatal(err)
	}
	if string(sec.GetValidationContext().GetTrustedCa().GetInlineBytes()) != string(want) {
		t.Errorf("file-root:system is not %s", path)
	}
}

// TestCredentialResource: a Gateway's credentialName is read from the
// credentials directory as a mounted Kubernetes TLS Secret; its -cacert
// resource is the Secret's ca.crt, else a Secret of its own.
func TestCredentialResource(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "only-ca-cacert"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "both"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "both", "ca.crt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		want    fileResource
		ok      bool
		wantErr string
	}{
		{name: "file-cert:/a~/b"},
		{name: "kubernetes://web", want: fileResource{cert: filepath.Join(dir, "web", "tls.crt"), key: filepath.Join(dir, "web", "tls.key")}, ok: true},
		{name: "kubernetes://both-cacert", want: fileResource{root: filepath.Join(dir, "both", "ca.crt"), crl: filepath.Join(dir, "both", "ca.crl")}, ok: true},
		{name: "kubernetes://only-ca-cacert", want: fileResource{root: filepath.Join(dir, "only-ca-cacert", "ca.crt"), crl: filepath.Join(dir, "only-ca-cacert", "ca.crl")}, ok: true},
		{name: "kubernetes://../etc", ok: true, wantErr: "NAME a Secret's name"},
		{name: "kubernetes://", ok: true, wantErr: "NAME a Secret's name"},
	} {
		got, ok, err := credentialResource(dir, tc.name)
		if ok != tc.ok || got != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: %+v %v %v, want %+v %v %q", tc.name, got, ok, err, tc.want, tc.ok, tc.wantErr)
		}
	}
}

// caWithCRL writes, into dir, a CA certificate (ca.crt) and, when
// withCRL, a PEM revocation list it signed (ca.crl); it returns the
// list's bytes.
func caWithCRL(t *testing.T, dir string, withCRL bool) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "client CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if !withCRL {
		return nil
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	crlDER, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: time.Now(),
		NextUpdate: time.Now().Add(time.Hour), RevokedCertificateEntries: []x509.RevocationListEntry{{SerialNumber: big.NewInt(9), RevocationTime: time.Now()}}}, ca, key)
	if err != nil {
		t.Fatal(err)
	}
	crl := pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: crlDER})
	if err := os.WriteFile(filepath.Join(dir, "ca.crl"), crl, 0o644); err != nil {
		t.Fatal(err)
	}
	return crl
}

// TestCredentialCRL: a MUTUAL Gateway credential's ca.crl (beside ca.crt
// in NAME or in NAME-cacert) is served in the CA's validation context, a
// changed list changes the version's digest, no file means no list, and
// a malformed one refuses the resource rather than serving the CA without
// it.
func TestCredentialCRL(t *testing.T) {
	dir := t.TempDir()
	inSecret := caWithCRL(t, filepath.Join(dir, "web"), true)
	inCASecret := caWithCRL(t, filepath.Join(dir, "api-cacert"), true)
	caWithCRL(t, filepath.Join(dir, "plain"), false)
	caWithCRL(t, filepath.Join(dir, "broken"), false)
	if err := os.WriteFile(filepath.Join(dir, "broken", "ca.crl"), []byte("not a CRL"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(name string) (crl []byte, raw []byte, err error) {
		t.Helper()
		r, ok, err := credentialResource(dir, name)
		if !ok || err != nil {
			t.Fatalf("%s: %v %v", name, ok, err)
		}
		sec, raw, err := r.read(name)
		if err != nil {
			return nil, nil, err
		}
		return sec.GetValidationContext().GetCrl().GetInlineBytes(), raw, nil
	}
	for name, want := range map[string][]byte{"kubernetes://web-cacert": inSecret, "kubernetes://api-cacert": inCASecret, "kubernetes://plain-cacert": nil} {
		got, _, err := read(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: crl %q, want %q", name, got, want)
		}
	}
	if _, _, err := read("kubernetes://broken-cacert"); err == nil || !strings.Contains(err.Error(), "revocation list") {
		t.Errorf("broken ca.crl: err = %v, want a revocation list error", err)
	}
	_, before, _ := read("kubernetes://web-cacert")
	caWithCRL(t, filepath.Join(dir, "web"), true)
	_, after, _ := read("kubernetes://web-cacert")
	if string(before) == string(after) {
		t.Error("a new ca.crt and ca.crl read the same bytes: the version would not change")
	}
}
