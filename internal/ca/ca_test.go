package ca

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var demo = Identity{TrustDomain: "cluster.local", Namespace: "demo", ServiceAccount: "client"}

func newCSR(t *testing.T, key crypto.Signer, uris ...string) []byte {
	t.Helper()
	tmpl := &x509.CertificateRequest{}
	for _, u := range uris {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func ecKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustParse(t *testing.T, s string) []*x509.Certificate {
	t.Helper()
	certs, err := parseCerts([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return certs
}

// verify checks chain[0] against the last element (the roots) through the
// ones between, for a client and for a server, as a TLS peer would.
func verify(t *testing.T, chain []string, at time.Time) *x509.Certificate {
	t.Helper()
	leaf := mustParse(t, chain[0])[0]
	roots := x509.NewCertPool()
	for _, r := range mustParse(t, chain[len(chain)-1]) {
		roots.AddCert(r)
	}
	inter := x509.NewCertPool()
	for _, s := range chain[1 : len(chain)-1] {
		for _, c := range mustParse(t, s) {
			inter.AddCert(c)
		}
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Fatalf("chain does not verify for %v: %v", usage, err)
		}
	}
	return leaf
}

func TestSelfSignedSignAndPersist(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	c, err := Load(Options{Dir: dir, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{KeyFile: 0o600, CertFile: 0o644, RootCertFile: 0o644} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != mode {
			t.Errorf("%s mode %v, want %v", name, st.Mode().Perm(), mode)
		}
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("ca dir mode %v, want 0700", st.Mode().Perm())
	}
	root := c.Roots()[0]
	if _, ok := root.PublicKey.(*ecdsa.PublicKey); !ok || !root.IsCA || root.Subject.Organization[0] != "cluster.local" {
		t.Errorf("root: key %T, CA %v, subject %v", root.PublicKey, root.IsCA, root.Subject)
	}
	if got := root.NotAfter.Sub(now); got != DefaultRootTTL {
		t.Errorf("root lifetime %v, want %v", got, DefaultRootTTL)
	}

	chain, err := c.Sign(SignRequest{CSR: newCSR(t, ecKey(t), demo.String()), Identity: demo})
	if err != nil {
		t.Fatal(err)
	}
	if len(chain) != 2 {
		t.Fatalf("self-signed chain has %d elements, want leaf and root", len(chain))
	}
	leaf := verify(t, chain, now)
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://cluster.local/ns/demo/sa/client" {
		t.Errorf("URIs %v", leaf.URIs)
	}
	if len(leaf.DNSNames)+len(leaf.IPAddresses)+len(leaf.EmailAddresses) != 0 || leaf.Subject.String() != "" {
		t.Errorf("leaf has more than its SPIFFE ID: %v %v %v subject %q", leaf.DNSNames, leaf.IPAddresses, leaf.EmailAddresses, leaf.Subject)
	}
	if leaf.IsCA {
		t.Error("leaf is a CA")
	}
	if leaf.KeyUsage != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment {
		t.Errorf("key usage %v", leaf.KeyUsage)
	}
	if got := leaf.NotAfter.Sub(now); got != DefaultWorkloadTTL {
		t.Errorf("lifetime %v, want %v", got, DefaultWorkloadTTL)
	}
	if !leaf.NotBefore.Before(now) {
		t.Errorf("NotBefore %v is not backdated before %v", leaf.NotBefore, now)
	}
	// The SAN extension is critical when the subject is empty (RFC 5280 4.2.1.6).
	critical := false
	for _, e := range leaf.Extensions {
		if e.Id.Equal([]int{2, 5, 29, 17}) {
			critical = e.Critical
		}
	}
	if !critical {
		t.Error("SAN extension is not critical")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: c.CertPool(), CurrentTime: now.Add(DefaultWorkloadTTL + time.Second)}); err == nil {
		t.Error("leaf still verifies after its lifetime")
	}

	// A second start loads the same root instead of making a new one.
	c2, err := Load(Options{Dir: dir, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if !c2.Roots()[0].Equal(root) {
		t.Error("restart generated a new root")
	}
	verify(t, chain, now) // and certificates from before still verify against it
	if string(c2.TrustBundle()) != chain[1] {
		t.Error("trust bundle differs from the chain's last element")
	}
}

func TestSignLifetime(t *testing.T) {
	now := time.Now().Truncate(time.Second) // certificates carry whole seconds
	c, err := Load(Options{Dir: t.TempDir(), DefaultTTL: time.Hour, MaxTTL: 2 * time.Hour, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	csr := newCSR(t, ecKey(t), demo.String())
	for _, tt := range []struct {
		ttl, want time.Duration
		err       string
	}{
		{0, time.Hour, ""},
		{90 * time.Minute, 90 * time.Minute, ""},
		{2 * time.Hour, 2 * time.Hour, ""},
		{2*time.Hour + time.Second, 0, "longer than the maximum 2h0m0s"},
		{-time.Second, 0, "negative"},
	} {
		chain, err := c.Sign(SignRequest{CSR: csr, Identity: demo, TTL: tt.ttl})
		if tt.err != "" {
			var se *SignError
			if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.As(err, &se) || se.Kind != KindInvalidRequest {
				t.Errorf("ttl %v: err %v, want invalid request %q", tt.ttl, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("ttl %v: %v", tt.ttl, err)
		}
		if got := mustParse(t, chain[0])[0].NotAfter.Sub(now).Round(time.Second); got != tt.want {
			t.Errorf("ttl %v: lifetime %v, want %v", tt.ttl, got, tt.want)
		}
	}
	if _, err := Load(Options{Dir: t.TempDir(), DefaultTTL: 3 * time.Hour, MaxTTL: 2 * time.Hour}); err == nil {
		t.Error("a default lifetime above the maximum was accepted")
	}
}

func TestSignRefusals(t *testing.T) {
	c, err := Load(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	key := ecKey(t)
	other := newCSR(t, key, "spiffe://cluster.local/ns/demo/sa/admin")
	dnsTmpl := &x509.CertificateRequest{DNSNames: []string{"evil.example"}}
	dnsDER, _ := x509.CreateCertificateRequest(rand.Reader, dnsTmpl, key)
	smallRSA, _ := rsa.GenerateKey(rand.Reader, 1024)
	tampered := newCSR(t, key, demo.String())
	block, _ := pem.Decode(tampered)
	block.Bytes[len(block.Bytes)-3] ^= 0xff
	for _, tt := range []struct {
		name string
		req  SignRequest
		kind Kind
		msg  string
	}{
		{"another service account", SignRequest{CSR: other, Identity: demo}, KindPermissionDenied, "asks for spiffe://cluster.local/ns/demo/sa/admin but the caller is spiffe://cluster.local/ns/demo/sa/client"},
		{"own identity, agent's trust domain not the mesh's", SignRequest{CSR: newCSR(t, key, "spiffe://old-td/ns/demo/sa/client"), Identity: demo}, KindPermissionDenied,
			`the agent's trust domain "old-td" is not the mesh's "cluster.local" (set TRUST_DOMAIN=cluster.local`},
		{"two URIs, one foreign", SignRequest{CSR: newCSR(t, key, demo.String(), "spiffe://cluster.local/ns/x/sa/y"), Identity: demo}, KindPermissionDenied, "asks for spiffe://cluster.local/ns/x/sa/y"},
		{"other trust domain", SignRequest{CSR: newCSR(t, key), Identity: Identity{TrustDomain: "other.org", Namespace: "a", ServiceAccount: "b"}}, KindPermissionDenied, `trust domain "cluster.local"`},
		{"DNS SAN", SignRequest{CSR: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: dnsDER}), Identity: demo}, KindInvalidRequest, "DNS, IP or email SANs"},
		{"not a CSR", SignRequest{CSR: []byte("hello"), Identity: demo}, KindInvalidRequest, "does not parse"},
		{"bad signature", SignRequest{CSR: pem.EncodeToMemory(block), Identity: demo}, KindInvalidRequest, "CSR"},
		{"small RSA key", SignRequest{CSR: newCSR(t, smallRSA, demo.String()), Identity: demo}, KindInvalidRequest, "1024 bits"},
		{"empty service account", SignRequest{CSR: newCSR(t, key), Identity: Identity{TrustDomain: "cluster.local", Namespace: "a"}}, KindInvalidRequest, "service account is empty"},
	} {
		_, err := c.Sign(tt.req)
		var se *SignError
		if !errors.As(err, &se) || se.Kind != tt.kind || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: err %v, want %s containing %q", tt.name, err, tt.kind, tt.msg)
		}
	}
	// A CSR with no URI SAN gets the caller's identity (as Istio's CA
	// ignores the CSR's SANs), and an RSA 2048 key (Istio's default) is fine.
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	chain, err := c.Sign(SignRequest{CSR: newCSR(t, rsaKey), Identity: demo})
	if err != nil {
		t.Fatal(err)
	}
	if u := mustParse(t, chain[0])[0].URIs; len(u) != 1 || u[0].String() != demo.String() {
		t.Errorf("URIs %v", u)
	}
}

// pki is a root and an intermediate CA made for the plug-in tests.
type pki struct {
	rootKey, interKey *ecdsa.PrivateKey
	root, inter       *x509.Certificate
}

func newPKI(t *testing.T, cn string) pki {
	t.Helper()
	p := pki{rootKey: ecKey(t), interKey: ecKey(t)}
	now := time.Now()
	rootT := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn + " root"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, rootT, rootT, p.rootKey.Public(), p.rootKey)
	if err != nil {
		t.Fatal(err)
	}
	p.root, _ = x509.ParseCertificate(der)
	interT := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn + " intermediate"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err = x509.CreateCertificate(rand.Reader, interT, p.root, p.interKey.Public(), p.rootKey)
	if err != nil {
		t.Fatal(err)
	}
	p.inter, _ = x509.ParseCertificate(der)
	return p
}

func certPEM(cs ...*x509.Certificate) string {
	var b strings.Builder
	for _, c := range cs {
		b.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
	}
	return b.String()
}

func keyPEM(t *testing.T, k *ecdsa.PrivateKey) string {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPluggedInCACerts(t *testing.T) {
	p := newPKI(t, "corp")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		CertFile:      certPEM(p.inter),
		KeyFile:       keyPEM(t, p.interKey),
		CertChainFile: certPEM(p.inter, p.root),
		RootCertFile:  certPEM(p.root),
	})
	c, err := Load(Options{PluggedDir: dir, Dir: filepath.Join(t.TempDir(), "unused")})
	if err != nil {
		t.Fatal(err)
	}
	chain, err := c.Sign(SignRequest{CSR: newCSR(t, ecKey(t), demo.String()), Identity: demo})
	if err != nil {
		t.Fatal(err)
	}
	// Istio's response: leaf, each certificate of cert-chain.pem, roots.
	if len(chain) != 4 {
		t.Fatalf("chain has %d elements, want 4 (leaf, intermediate, root from cert-chain.pem, trust bundle)", len(chain))
	}
	leaf := verify(t, chain, time.Now())
	if !mustParse(t, chain[1])[0].Equal(p.inter) || !mustParse(t, chain[3])[0].Equal(p.root) {
		t.Error("chain elements are not intermediate then root")
	}
	if err := leaf.CheckSignatureFrom(p.inter); err != nil {
		t.Errorf("leaf is not signed by the plugged-in intermediate: %v", err)
	}
	// The leaf must not verify against the intermediate's root without the
	// intermediate, i.e. the chain really is needed.
	pool := x509.NewCertPool()
	pool.AddCert(p.root)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool}); err == nil {
		t.Error("leaf verifies without the intermediate")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "unused")); err == nil {
		t.Error("a plugged-in CA still generated a self-signed root")
	}

	// An empty cert-chain.pem beside an intermediate: the response still
	// carries the intermediate, so a peer with only the root verifies it.
	emptyChain := t.TempDir()
	writeFiles(t, emptyChain, map[string]string{
		CertFile: certPEM(p.inter), KeyFile: keyPEM(t, p.interKey), CertChainFile: "\n", RootCertFile: certPEM(p.root),
	})
	c, err = Load(Options{PluggedDir: emptyChain})
	if err != nil {
		t.Fatal(err)
	}
	chain, err = c.Sign(SignRequest{CSR: newCSR(t, ecKey(t), demo.String()), Identity: demo})
	if err != nil {
		t.Fatal(err)
	}
	if len(chain) != 3 || !mustParse(t, chain[1])[0].Equal(p.inter) {
		t.Fatalf("empty cert-chain.pem: chain has %d elements, want leaf, intermediate, trust bundle", len(chain))
	}
	verify(t, chain, time.Now())

	other := newPKI(t, "other")
	for _, tt := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"missing chain", map[string]string{CertFile: certPEM(p.inter), KeyFile: keyPEM(t, p.interKey), RootCertFile: certPEM(p.root)}, CertChainFile},
		{"wrong key", map[string]string{CertFile: certPEM(p.inter), KeyFile: keyPEM(t, other.interKey), CertChainFile: certPEM(p.inter, p.root), RootCertFile: certPEM(p.root)}, "does not match the public key"},
		{"foreign root", map[string]string{CertFile: certPEM(p.inter), KeyFile: keyPEM(t, p.interKey), CertChainFile: certPEM(p.inter, p.root), RootCertFile: certPEM(other.root)}, "does not chain to a root"},
		{"chain not starting at ca-cert", map[string]string{CertFile: certPEM(p.inter), KeyFile: keyPEM(t, p.interKey), CertChainFile: certPEM(p.root), RootCertFile: certPEM(p.root)}, "must start with"},
		{"CRL refused", map[string]string{CertFile: certPEM(p.inter), KeyFile: keyPEM(t, p.interKey), CertChainFile: certPEM(p.inter, p.root), RootCertFile: certPEM(p.root), CRLFile: "x"}, "ca-crl.pem: certificate revocation lists are not supported by Strait yet"},
		{"not a CA", map[string]string{CertFile: certPEM(mustParse(t, chain[0])...), KeyFile: keyPEM(t, p.interKey), CertChainFile: certPEM(p.inter), RootCertFile: certPEM(p.root)}, "is not a CA certificate"},
	} {
		d := t.TempDir()
		writeFiles(t, d, tt.files)
		if _, err := Load(Options{PluggedDir: d}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestRootRotationBundle walks the first two steps of a root rotation on a
// running CA: a second root added to root-cert.pem is served at once in the
// trust bundle (workloads signed by the old root keep verifying), then the
// signing CA switches to the new root and new leaves verify against the
// same two-root bundle, which old peers already hold.
func TestRootRotationBundle(t *testing.T) {
	old, next := newPKI(t, "old"), newPKI(t, "new")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		CertFile: certPEM(old.inter), KeyFile: keyPEM(t, old.interKey),
		CertChainFile: certPEM(old.inter, old.root), RootCertFile: certPEM(old.root),
	})
	c, err := Load(Options{PluggedDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.Sign(SignRequest{CSR: newCSR(t, ecKey(t)), Identity: demo})
	if err != nil {
		t.Fatal(err)
	}
	// Step 1: both roots trusted, still signing with the old CA.
	writeFiles(t, dir, map[string]string{RootCertFile: certPEM(old.root, next.root)})
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	if n := len(c.Roots()); n != 2 {
		t.Fatalf("%d roots after adding one, want 2", n)
	}
	during, err := c.Sign(SignRequest{CSR: newCSR(t, ecKey(t)), Identity: demo})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustParse(t, during[len(during)-1]); len(got) != 2 {
		t.Fatalf("response's trust bundle has %d roots, want 2", len(got))
	}
	// Step 2: sign with the new CA.
	writeFiles(t, dir, map[string]string{CertFile: certPEM(next.inter), KeyFile: keyPEM(t, next.interKey), CertChainFile: certPEM(next.inter, next.root)})
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	after, err := c.Sign(SignRequest{CSR: newCSR(t, ecKey(t)), Identity: demo})
	if err != nil {
		t.Fatal(err)
	}
	if err := mustParse(t, after[0])[0].CheckSignatureFrom(next.inter); err != nil {
		t.Fatalf("after the switch the leaf is not signed by the new CA: %v", err)
	}
	// A peer holding the step-1 bundle verifies the new leaf, and a peer
	// holding the new bundle verifies an old leaf.
	verify(t, append(after[:len(after)-1:len(after)-1], during[len(during)-1]), time.Now())
	verify(t, append(before[:len(before)-1:len(before)-1], after[len(after)-1]), time.Now())

	// A broken file leaves the CA signing with what it had.
	writeFiles(t, dir, map[string]string{KeyFile: "garbage"})
	if err := c.Reload(); err == nil {
		t.Fatal("reload of a broken key succeeded")
	}
	if _, err := c.Sign(SignRequest{CSR: newCSR(t, ecKey(t)), Identity: demo}); err != nil {
		t.Fatalf("sign after a failed reload: %v", err)
	}
}

func TestIssueServing(t *testing.T) {
	p := newPKI(t, "corp")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{CertFile: certPEM(p.inter), KeyFile: keyPEM(t, p.interKey), CertChainFile: certPEM(p.inter, p.root), RootCertFile: certPEM(p.root)})
	c, err := Load(Options{PluggedDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	tc, err := c.IssueServing(ServingOptions{DNSNames: []string{"straitd.istio-system.svc"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(tc.Certificate) != 2 {
		t.Fatalf("serving chain has %d certificates, want leaf and intermediate (not the root)", len(tc.Certificate))
	}
	inter := x509.NewCertPool()
	inter.AddCert(p.inter)
	if _, err := tc.Leaf.Verify(x509.VerifyOptions{DNSName: "straitd.istio-system.svc", Roots: c.CertPool(), Intermediates: inter}); err != nil {
		t.Fatal(err)
	}
}

func TestParseIdentity(t *testing.T) {
	id, err := ParseIdentity("spiffe://cluster.local/ns/demo/sa/client")
	if err != nil || id != demo {
		t.Fatalf("%+v %v", id, err)
	}
	for _, bad := range []string{"https://cluster.local/ns/demo/sa/client", "spiffe://cluster.local/ns/demo", "spiffe:///ns/a/sa/b",
		"spiffe://cluster.local/sa/demo/ns/client", "spiffe://cluster.local/ns/a/sa/b?x=1", "spiffe://td:80/ns/a/sa/b", "spiffe://cluster.local/ns//sa/b"} {
		if _, err := ParseIdentity(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestWatchReloads changes root-cert.pem under a running Watch: the CA
// picks up the second root without a restart, and a broken write is
// survived.
func TestWatchReloads(t *testing.T) {
	dir := t.TempDir()
	c, err := Load(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Watch(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	other, err := Load(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// Watch may not have added its watch yet: write until a reload is seen.
	changed := c.Changed()
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for len(c.Roots()) != 2 {
		writeFiles(t, dir, map[string]string{RootCertFile: string(c.TrustBundle()) + string(other.TrustBundle())})
		select {
		case <-changed:
		case <-tick.C:
		case <-deadline:
			t.Fatal("root-cert.pem with two roots was not reloaded within 20s")
		}
	}
}

// TestWatchReloadsChangeBeforeWatch: files changed after Load but before
// Watch set up its watch (no event for them) are still reloaded; unchanged
// files are not reloaded.
func TestWatchReloadsChangeBeforeWatch(t *testing.T) {
	dir := t.TempDir()
	c, err := Load(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	runWatch := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Watch(ctx) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}
	// Unchanged files: no reload.
	changed := c.Changed()
	stop := runWatch()
	select {
	case <-changed:
		t.Fatal("Watch reloaded files that had not changed")
	case <-time.After(2 * reloadDelay):
	}
	stop()

	other, err := Load(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{RootCertFile: string(c.TrustBundle()) + string(other.TrustBundle())})
	changed = c.Changed()
	defer runWatch()()
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("root-cert.pem rewritten before Watch started was not reloaded")
	}
	if n := len(c.Roots()); n != 2 {
		t.Fatalf("%d roots after the reload, want 2", n)
	}
}

func TestLoadEdgeCases(t *testing.T) {
	// A default lifetime equal to the maximum is fine.
	if _, err := Load(Options{Dir: t.TempDir(), DefaultTTL: time.Hour, MaxTTL: time.Hour}); err != nil {
		t.Errorf("default == max: %v", err)
	}
	p := newPKI(t, "corp")
	// A CA certificate without keyCertSign cannot sign.
	noSign := &x509.Certificate{SerialNumber: big.NewInt(9), Subject: pkix.Name{CommonName: "no sign"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, noSign, p.root, p.interKey.Public(), p.rootKey)
	if err != nil {
		t.Fatal(err)
	}
	noSignCert, _ := x509.ParseCertificate(der)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{CertFile: certPEM(noSignCert), KeyFile: keyPEM(t, p.interKey), CertChainFile: certPEM(noSignCert, p.root), RootCertFile: certPEM(p.root)})
	if _, err := Load(Options{PluggedDir: dir}); err == nil || !strings.Contains(err.Error(), "keyCertSign") {
		t.Errorf("CA without keyCertSign: %v", err)
	}
	// PEM blocks of other types (a key, parameters) around the
	// certificates are skipped, not the end of the file.
	other := "-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n"
	dir = t.TempDir()
	writeFiles(t, dir, map[string]string{CertFile: other + certPEM(p.inter), KeyFile: keyPEM(t, p.interKey), CertChainFile: other + certPEM(p.inter, p.root), RootCertFile: other + certPEM(p.root)})
	if _, err := Load(Options{PluggedDir: dir}); err != nil {
		t.Errorf("files with other PEM blocks first: %v", err)
	}
	// A key as openssl ecparam -genkey writes it: parameters, then the key.
	dir = t.TempDir()
	writeFiles(t, dir, map[string]string{CertFile: certPEM(p.inter), KeyFile: other + keyPEM(t, p.interKey), CertChainFile: certPEM(p.inter, p.root), RootCertFile: certPEM(p.root)})
	if _, err := Load(Options{PluggedDir: dir}); err != nil {
		t.Errorf("ca-key.pem with EC PARAMETERS first: %v", err)
	}
}

// TestSignClipsToCAExpiry: a certificate never outlives the CA that signs
// it (newPKI's intermediate expires in 24 h).
func TestSignClipsToCAExpiry(t *testing.T) {
	p := newPKI(t, "corp")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{CertFile: certPEM(p.inter), KeyFile: keyPEM(t, p.interKey), CertChainFile: certPEM(p.inter, p.root), RootCertFile: certPEM(p.root)})
	c, err := Load(Options{PluggedDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	chain, err := c.Sign(SignRequest{CSR: newCSR(t, ecKey(t)), Identity: demo, TTL: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustParse(t, chain[0])[0].NotAfter; !got.Equal(p.inter.NotAfter) {
		t.Errorf("NotAfter %v, want the CA's %v", got, p.inter.NotAfter)
	}
}

// TestServingCertRenews: straitd's serving certificate is reused until 80%
// of its lifetime, then re-issued.
func TestServingCertRenews(t *testing.T) {
	now := time.Now()
	c, err := Load(Options{Dir: t.TempDir(), DefaultTTL: 10 * time.Hour, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := NewServingCert(c, ServingOptions{DNSNames: []string{"straitd.istio-system.svc"}})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := sc.GetCertificate(nil)
	now = now.Add(7*time.Hour + 59*time.Minute)
	if again, _ := sc.GetCertificate(nil); again != first {
		t.Fatal("re-issued before 80% of the lifetime")
	}
	now = now.Add(2 * time.Minute)
	renewed, err := sc.GetCertificate(nil)
	if err != nil || renewed == first {
		t.Fatalf("not re-issued after 80%% of the lifetime (%v)", err)
	}
	if renewed.Leaf.DNSNames[0] != "straitd.istio-system.svc" {
		t.Errorf("names %v", renewed.Leaf.DNSNames)
	}
}

// TestServingCertFollowsRotation: once a root rotation switches the signing
// CA, straitd's serving certificate is re-issued under the new CA at the
// next handshake, long before 80% of its lifetime, so an agent that trusts
// only the new root can connect.
func TestServingCertFollowsRotation(t *testing.T) {
	old, next := newPKI(t, "old"), newPKI(t, "new")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		CertFile: certPEM(old.inter), KeyFile: keyPEM(t, old.interKey),
		CertChainFile: certPEM(old.inter, old.root), RootCertFile: certPEM(old.root, next.root),
	})
	c, err := Load(Options{PluggedDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := NewServingCert(c, ServingOptions{DNSNames: []string{"istiod.istio-system.svc"}})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := sc.GetCertificate(nil)
	if again, _ := sc.GetCertificate(nil); again != first {
		t.Fatal("re-issued without a CA change")
	}
	writeFiles(t, dir, map[string]string{CertFile: certPEM(next.inter), KeyFile: keyPEM(t, next.interKey), CertChainFile: certPEM(next.inter, next.root)})
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	got, err := sc.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Leaf.CheckSignatureFrom(next.inter); err != nil {
		t.Fatalf("serving certificate after the CA switched is not signed by the new CA: %v", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(next.root)
	inter := x509.NewCertPool()
	for _, der := range got.Certificate[1:] {
		ic, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		inter.AddCert(ic)
	}
	if _, err := got.Leaf.Verify(x509.VerifyOptions{DNSName: "istiod.istio-system.svc", Roots: roots, Intermediates: inter}); err != nil {
		t.Errorf("an agent trusting only the new root cannot verify straitd: %v", err)
	}
	if again, _ := sc.GetCertificate(nil); again != got {
		t.Error("re-issued again without another CA change")
	}
}

// The defaults are Istio's (DEFAULT_WORKLOAD_CERT_TTL, MAX_WORKLOAD_CERT_TTL,
// CITADEL_SELF_SIGNED_CA_CERT_TTL): compatibility, not taste.
func TestIstioDefaults(t *testing.T) {
	if DefaultWorkloadTTL != 24*time.Hour || DefaultMaxTTL != 2160*time.Hour || DefaultRootTTL != 87600*time.Hour || DefaultTrustDomain != "cluster.local" {
		t.Errorf("defaults %v %v %v %q differ from Istio's", DefaultWorkloadTTL, DefaultMaxTTL, DefaultRootTTL, DefaultTrustDomain)
	}
}
