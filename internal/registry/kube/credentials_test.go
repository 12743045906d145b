package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net/netip"
	"strings"
	"testing"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
)

// testPKI is a CA and a server certificate it issued, in PEM.
type testPKI struct {
	caPEM, certPEM, keyPEM []byte
	crlPEM                 []byte // revokes serial 99
}

func newTestPKI(t *testing.T, host string) testPKI {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, leafKey := key(), key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	crlDER, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(1),
		ThisUpdate: time.Now().Add(-time.Minute), NextUpdate: time.Now().Add(time.Hour),
		RevokedCertificateEntries: []x509.RevocationListEntry{{SerialNumber: big.NewInt(99), RevocationTime: time.Now()}}}, ca, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return testPKI{
		crlPEM:  pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: crlDER}),
		caPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
}

func secretOf(ns, name string, typ corev1.SecretType, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: typ, Data: data}
}

func storeOf(t *testing.T, secrets ...*corev1.Secret) secretStore {
	t.Helper()
	s := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, sec := range secrets {
		if err := s.Add(sec); err != nil {
			t.Fatal(err)
		}
	}
	return secretStore{s}
}

// TestCredentialFormats: Istio's Secret formats for a Gateway's
// credentialName, checked as mesh.Credentials (SIMPLE and MUTUAL).
func TestCredentialFormats(t *testing.T) {
	a, b := newTestPKI(t, "a.example.com"), newTestPKI(t, "b.example.com")
	tlsType := corev1.SecretTypeTLS
	store := storeOf(t,
		secretOf("gw", "tls", tlsType, map[string][]byte{"tls.crt": a.certPEM, "tls.key": a.keyPEM}),
		secretOf("gw", "tls-ca", tlsType, map[string][]byte{"tls.crt": a.certPEM, "tls.key": a.keyPEM, "ca.crt": a.caPEM}),
		secretOf("gw", "generic", corev1.SecretTypeOpaque, map[string][]byte{"cert": a.certPEM, "key": a.keyPEM, "cacert": a.caPEM}),
		secretOf("gw", "split", tlsType, map[string][]byte{"tls.crt": a.certPEM, "tls.key": a.keyPEM}),
		secretOf("gw", "split-cacert", corev1.SecretTypeOpaque, map[string][]byte{"cacert": b.caPEM}),
		secretOf("gw", "split-tlsca", tlsType, map[string][]byte{"tls.crt": a.certPEM, "tls.key": a.keyPEM}),
		secretOf("gw", "split-tlsca-cacert", corev1.SecretTypeOpaque, map[string][]byte{"ca.crt": b.caPEM}),
		secretOf("gw", "mismatch", tlsType, map[string][]byte{"tls.crt": a.certPEM, "tls.key": b.keyPEM}),
		secretOf("gw", "garbage", tlsType, map[string][]byte{"tls.crt": []byte("not pem"), "tls.key": a.keyPEM}),
		secretOf("gw", "nokey", corev1.SecretTypeOpaque, map[string][]byte{"cert": a.certPEM}),
		secretOf("gw", "badca", tlsType, map[string][]byte{"tls.crt": a.certPEM, "tls.key": a.keyPEM, "ca.crt": a.keyPEM}),
		secretOf("gw", "crl", tlsType, map[string][]byte{"tls.crt": a.certPEM, "tls.key": a.keyPEM, "ca.crt": a.caPEM, "ca.crl": a.crlPEM}),
		secretOf("gw", "badcrl", tlsType, map[string][]byte{"tls.crt": a.certPEM, "tls.key": a.keyPEM, "ca.crt": a.caPEM, "ca.crl": []byte("x")}),
		secretOf("gw", "genericbadcrl", corev1.SecretTypeOpaque, map[string][]byte{"cert": a.certPEM, "key": a.keyPEM, "cacert": a.caPEM, "crl": []byte("x")}),
		secretOf("gw", "staple", tlsType, map[string][]byte{"tls.crt": a.certPEM, "tls.key": a.keyPEM, "tls.ocsp-staple": []byte("x")}),
	)
	for _, tc := range []struct {
		name    string
		mutual  bool
		wantErr string // "" : served
	}{
		{"tls", false, ""},
		{"tls", true, "secret gw/tls has no CA certificates (ca.crt or cacert), which a MUTUAL server needs (or put them in a Secret tls-cacert)"},
		{"tls-ca", true, ""},
		{"generic", false, ""},
		{"generic", true, ""},
		{"split", true, ""},
		{"split-tlsca", true, ""},
		{"mismatch", false, "secret gw/mismatch: the certificate and private key do not make a key pair"},
		{"garbage", false, "secret gw/garbage: the certificate and private key do not make a key pair"},
		{"nokey", false, "secret gw/nokey has neither tls.crt and tls.key (a kubernetes.io/tls Secret) nor cert and key (a generic Secret); found keys cert"},
		{"badca", false, ""},
		{"badca", true, "secret gw/badca: CA certificates: PEM block \"EC PRIVATE KEY\", want CERTIFICATE"},
		{"crl", true, ""},
		{"badcrl", false, ""},
		{"badcrl", true, "secret gw/badcrl: ca.crl: no PEM \"X509 CRL\" block and not a DER CRL"},
		{"genericbadcrl", true, "secret gw/genericbadcrl: crl: no PEM"},
		{"staple", false, "secret gw/staple: key tls.ocsp-staple is not supported"},
		{"absent", false, "secret gw/absent not found"},
		{"absent", true, "secret gw/absent not found"},
	} {
		err := store.Check("gw", tc.name, tc.mutual)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s mutual=%t: %v", tc.name, tc.mutual, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s mutual=%t: error %v, want %q", tc.name, tc.mutual, err, tc.wantErr)
		}
	}
	// The separate CA Secret wins over the credential's own CA.
	ca, _, err := store.caCerts("gw", "split")
	if err != nil || string(ca) != string(b.caPEM) {
		t.Errorf("CA of split: %v, want split-cacert's", err)
	}
	if err := store.Check("other", "tls", false); err == nil {
		t.Error("a Secret of namespace gw served for namespace other")
	}
}

// TestGenerateSecretsAuthorization: a gateway gets the Secrets of its
// own namespace as Istio's SecretGen sends them (a tls_certificate for
// kubernetes://NAME, a validation_context for kubernetes://NAME-cacert);
// a sidecar is refused with an error saying why; a name of another
// namespace, of no Secret, or of a malformed Secret is left out.
func TestGenerateSecretsAuthorization(t *testing.T) {
	a := newTestPKI(t, "a.example.com")
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, s := range []*corev1.Secret{
		secretOf("gw", "cred", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": a.certPEM, "tls.key": a.keyPEM, "ca.crt": a.caPEM, "ca.crl": a.crlPEM}),
		secretOf("other", "cred", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": a.certPEM, "tls.key": a.keyPEM}),
		secretOf("gw", "broken", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": a.certPEM}),
	} {
		if err := store.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.DiscardHandler)
	router, err := proxypush.ParseNodeID("router~10.0.0.1~ingress-abc.gw~gw.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	router.PeerIP = netip.MustParseAddr("10.0.0.1")
	watched := []string{"kubernetes://cred", "kubernetes://cred-cacert", "kubernetes://gw/cred", "kubernetes://other/cred",
		"kubernetes://broken", "kubernetes://absent", "file-root:/etc/ca.crt"}
	res, err := generateSecrets(secretStore{store}, log, router, watched, checkSecretPeer, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*tlsv3.Secret{}
	for _, rs := range res {
		var s tlsv3.Secret
		if err := rs.GetResource().UnmarshalTo(&s); err != nil {
			t.Fatal(err)
		}
		if s.GetName() != rs.GetName() {
			t.Errorf("resource %s holds secret %s", rs.GetName(), s.GetName())
		}
		got[rs.GetName()] = &s
	}
	if len(got) != 3 {
		t.Errorf("served %d secrets %v, want kubernetes://cred, kubernetes://cred-cacert, kubernetes://gw/cred", len(got), keysOf(got))
	}
	for _, n := range []string{"kubernetes://cred", "kubernetes://gw/cred"} {
		tc := got[n].GetTlsCertificate()
		if string(tc.GetCertificateChain().GetInlineBytes()) != string(a.certPEM) || string(tc.GetPrivateKey().GetInlineBytes()) != string(a.keyPEM) {
			t.Errorf("%s: %v, want the Secret's tls.crt and tls.key", n, got[n])
		}
	}
	if vc := got["kubernetes://cred-cacert"].GetValidationContext(); string(vc.GetTrustedCa().GetInlineBytes()) != string(a.caPEM) ||
		string(vc.GetCrl().GetInlineBytes()) != string(a.crlPEM) {
		t.Errorf("kubernetes://cred-cacert: %v, want the Secret's ca.crt and ca.crl", got["kubernetes://cred-cacert"])
	}

	sidecar, err := proxypush.ParseNodeID("sidecar~10.0.0.2~app-abc.gw~gw.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	sidecar.PeerIP = netip.MustParseAddr("10.0.0.2")
	res, err = generateSecrets(secretStore{store}, log, sidecar, []string{"kubernetes://cred"}, checkSecretPeer, nil)
	const want = "is a sidecar: Secrets (a Gateway's credentialName) are served only to gateways (proxy router) of the Secret's namespace"
	if err == nil || !strings.Contains(err.Error(), want) || len(res) != 0 {
		t.Errorf("sidecar: %d resources, error %v; want none and %q", len(res), err, want)
	}
	granted := func(ns, resource string) bool { return ns == "gw" && resource == "kubernetes-gateway://other/cred" }
	for _, tc := range []struct {
		resource string
		ok       bool
	}{
		{"kubernetes-gateway://gw/cred", true},
		{"kubernetes-gateway://other/cred", true},
		{"kubernetes-gateway://other/cred2", false},
		{"kubernetes-gateway://cred", false},
		{"kubernetes://other/cred", false},
	} {
		if _, err := parseCredentialResource(tc.resource, "gw", granted); (err == nil) != tc.ok {
			t.Errorf("%s: error %v, want allowed %t", tc.resource, err, tc.ok)
		}
	}
	if _, err := parseCredentialResource("kubernetes://other/cred", "gw", nil); err == nil ||
		!strings.Contains(err.Error(), "the Secret is in namespace other, the gateway in gw; a gateway reads only the Secrets of its own namespace") {
		t.Errorf("cross-namespace reference: %v", err)
	}
}

// TestSecretsOnly: a push naming only Secrets concerns the gateways of
// their namespaces; anything else in it makes it an ordinary push.
func TestSecretsOnly(t *testing.T) {
	secret := proxypush.ConfigKey{Kind: KindSecret, Namespace: "gw", Name: "cred"}
	ns, ok := SecretsOnly(&proxypush.PushRequest{Full: true, ConfigsUpdated: map[proxypush.ConfigKey]struct{}{secret: {}}})
	if !ok || !ns["gw"] || len(ns) != 1 {
		t.Errorf("secret push: %v %t", ns, ok)
	}
	vs := proxypush.ConfigKey{Kind: "VirtualService", Namespace: "gw", Name: "vs"}
	if _, ok := SecretsOnly(&proxypush.PushRequest{Full: true, ConfigsUpdated: map[proxypush.ConfigKey]struct{}{secret: {}, vs: {}}}); ok {
		t.Error("a push with a VirtualService too is secrets-only")
	}
	if _, ok := SecretsOnly(&proxypush.PushRequest{Full: true}); ok {
		t.Error("a global push is secrets-only")
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestOnSecretPushesOnlyNamedCredentials: a Secret that a Gateway's
// credentialName names (NAME, or its NAME-cacert) pushes, naming the
// Secret; any other Secret, and a relist that changes nothing, do not.
func TestOnSecretPushesOnlyNamedCredentials(t *testing.T) {
	res := istioconfig.ParseFileWith("gw.yaml", []byte(`apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: ingress, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 443, name: https, protocol: HTTPS}
    hosts: [a.example.com]
    tls: {mode: MUTUAL, credentialName: cred}
`), istioconfig.ParseOptions{})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	store := istioconfig.NewStore()
	for _, c := range res.Configs {
		if err := store.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	snap, _ := mesh.Build(store, mesh.BuildOptions{})
	r := &Registry{log: slog.New(slog.DiscardHandler)}
	r.snap.Store(snap)
	sec := func(name, version string) *corev1.Secret {
		s := secretOf("gw", name, corev1.SecretTypeTLS, nil)
		s.UID, s.ResourceVersion = types.UID("uid-"+name), version
		return s
	}
	for _, tc := range []struct {
		ev   event
		push bool
	}{
		{event{typ: eventAdd, obj: sec("cred", "1")}, true},
		{event{typ: eventAdd, obj: sec("cred-cacert", "1")}, true},
		{event{typ: eventDelete, obj: sec("cred", "2")}, true},
		{event{typ: eventAdd, obj: sec("unrelated", "1")}, false},
		{event{typ: eventUpdate, old: sec("cred", "3"), obj: sec("cred", "3")}, false},
	} {
		req := r.onSecret(context.Background(), tc.ev)
		if (req != nil) != tc.push {
			t.Errorf("%s %s: push %v, want %t", tc.ev.typ, tc.ev.obj.(*corev1.Secret).Name, req, tc.push)
			continue
		}
		if req != nil {
			name := tc.ev.obj.(*corev1.Secret).Name
			if _, ok := req.ConfigsUpdated[proxypush.ConfigKey{Kind: KindSecret, Namespace: "gw", Name: name}]; !ok || !req.Full {
				t.Errorf("%s: push %+v, want a full push naming Secret gw/%s", name, req, name)
			}
		}
	}
}

// TestOnSecretOfGatewayAPICertificate: a Secret that a Gateway API
// Gateway's certificateRefs name pushes (the translation looks it up
// again) though no Istio Gateway names it (its listener is not served
// while it is missing); a Secret read by the Gateways of another
// namespace (a ReferenceGrant) is also named there, by the resource name
// those gateways read it by, so that the Secret-only push reaches them.
func TestOnSecretOfGatewayAPICertificate(t *testing.T) {
	snap, _ := mesh.Build(istioconfig.NewStore(), mesh.BuildOptions{})
	r := &Registry{log: slog.New(slog.DiscardHandler), gwSecrets: map[string][]string{"gw/late": {"gw"}, "certs/shared": {"apps", "gw"}}}
	r.snap.Store(snap)
	sec := func(ns, name string) *corev1.Secret {
		s := secretOf(ns, name, corev1.SecretTypeTLS, nil)
		s.UID, s.ResourceVersion = types.UID("uid-"+name), "1"
		return s
	}
	if req := r.onSecret(context.Background(), event{typ: eventAdd, obj: sec("gw", "unrelated")}); req != nil {
		t.Errorf("unrelated Secret pushes %+v", req)
	}
	req := r.onSecret(context.Background(), event{typ: eventAdd, obj: sec("gw", "late")})
	if ns, ok := SecretsOnly(req); !ok || len(ns) != 1 || !ns["gw"] {
		t.Errorf("gw/late: push %+v, want one for the gateways of gw", req)
	}
	req = r.onSecret(context.Background(), event{typ: eventAdd, obj: sec("certs", "shared")})
	if ns, ok := SecretsOnly(req); !ok || len(ns) != 3 || !ns["gw"] || !ns["apps"] || !ns["certs"] {
		t.Errorf("certs/shared: push %+v, want one for the gateways of certs, apps and gw", req)
	}
	if _, ok := req.ConfigsUpdated[proxypush.ConfigKey{Kind: KindSecret, Namespace: "apps", Name: "kubernetes-gateway://certs/shared"}]; !ok {
		t.Errorf("certs/shared: push %+v does not name it as the gateways of apps read it", req)
	}
}

// TestStripSecretKeepsTheCredential: the cached Secret loses its
// annotations (kubectl's last-applied copy of the data), labels and
// managed fields, and still reads as the same credential.
func TestStripSecretKeepsTheCredential(t *testing.T) {
	a := newTestPKI(t, "a.example.com")
	s := secretOf("gw", "cred", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": a.certPEM, "tls.key": a.keyPEM})
	s.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 4096)}
	s.Labels = map[string]string{"app": "web"}
	s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	obj, err := stripSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*corev1.Secret)
	if got.Annotations != nil || got.Labels != nil || got.ManagedFields != nil {
		t.Errorf("kept %v %v %v", got.Annotations, got.Labels, got.ManagedFields)
	}
	if got.Namespace != "gw" || got.Name != "cred" || got.Type != corev1.SecretTypeTLS {
		t.Errorf("identity lost: %s/%s %s", got.Namespace, got.Name, got.Type)
	}
	if err := storeOf(t, got).Check("gw", "cred", false); err != nil {
		t.Errorf("stripped Secret: %v", err)
	}
}
