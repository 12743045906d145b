// Package ca is straitd's certificate authority: it signs workload
// certificates whose only SAN is the workload's SPIFFE ID, from either a
// self-signed root it generates and keeps in a directory, or a CA plugged in
// from a directory in Istio's cacerts layout (ca-cert.pem, ca-key.pem,
// cert-chain.pem, root-cert.pem).
//
// Keys: a self-signed root is ECDSA P-256 (Istio's self-signed root is RSA
// 2048 by default; P-256 is as strong as RSA 3072, and much cheaper to sign
// with and to generate). A plugged-in CA may hold an RSA, ECDSA or Ed25519
// key. CSRs of any of those key types are signed.
//
// Root rotation: root-cert.pem is a trust bundle and may hold several roots.
// Every certificate response and every trust-bundle read returns all of
// them, so rotating the root is: (1) add the new root to root-cert.pem and
// wait one workload-certificate lifetime, so every workload trusts both;
// (2) switch ca-cert.pem/ca-key.pem (and cert-chain.pem) to a CA under the
// new root and wait one lifetime, so every workload holds a certificate
// under it; (3) remove the old root. Reload picks each step up without a
// restart. See docs/architecture.md ("Identity").
package ca

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// File names of Istio's cacerts layout, used for both a plugged-in CA and
// the self-signed root straitd persists.
const (
	CertFile      = "ca-cert.pem"
	KeyFile       = "ca-key.pem"
	CertChainFile = "cert-chain.pem"
	RootCertFile  = "root-cert.pem"
	// CRLFile is Istio's optional certificate revocation list of a
	// plugged-in CA. Strait does not distribute or check CRLs, so a CA
	// directory holding one is refused rather than loaded with revoked
	// certificates still trusted.
	CRLFile = "ca-crl.pem"
)

// Defaults, as Istio's (DEFAULT_WORKLOAD_CERT_TTL, MAX_WORKLOAD_CERT_TTL,
// CITADEL_SELF_SIGNED_CA_CERT_TTL).
const (
	DefaultTrustDomain = "cluster.local"
	DefaultWorkloadTTL = 24 * time.Hour
	DefaultMaxTTL      = 90 * 24 * time.Hour
	DefaultRootTTL     = 10 * 365 * 24 * time.Hour
	// DefaultDir is straitd's --ca-dir: the self-signed root and the
	// file-mode token key live here.
	DefaultDir = "/var/lib/straitd/ca"
	// clockSkew backdates NotBefore so a peer whose clock is a little
	// behind accepts a certificate issued a moment ago.
	clockSkew = time.Minute
)

// Options configure Load.
type Options struct {
	// Dir is where the self-signed root is kept: loaded if Dir/ca-cert.pem
	// exists, else generated and written there (keys 0600). Used when
	// PluggedDir is empty.
	Dir string
	// PluggedDir is a plugged-in CA in Istio's cacerts layout; all four
	// files must be there. It takes precedence over Dir.
	PluggedDir string
	// TrustDomain of the SPIFFE IDs signed (default cluster.local).
	TrustDomain string
	// DefaultTTL is the lifetime of a certificate whose request asks for
	// none (default 24h); MaxTTL is the longest one granted (default 90
	// days): a longer request is refused.
	DefaultTTL, MaxTTL time.Duration
	// RootTTL is the lifetime of a generated root (default 10 years).
	RootTTL time.Duration
	Logger  *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// CA signs workload certificates. Its methods are safe for concurrent use.
type CA struct {
	// Set at creation, read-only.
	opts Options
	log  *slog.Logger

	mu      sync.RWMutex // guards kc and changed; Reload replaces kc whole
	kc      *bundle
	changed chan struct{} // closed and replaced by every successful Reload
}

// bundle is one loaded state of the CA's files, never modified once built.
type bundle struct {
	signer   crypto.Signer
	cert     *x509.Certificate   // the signing certificate (ca-cert.pem)
	chainPEM []byte              // cert-chain.pem: from ca-cert up; empty for a self-signed root
	chain    []*x509.Certificate // parsed chainPEM
	rootsPEM []byte              // root-cert.pem: the trust bundle, one or more roots
	roots    []*x509.Certificate
	plugged  bool
}

// Load opens (or, for a self-signed root, creates) the CA.
func Load(opts Options) (*CA, error) {
	if opts.TrustDomain == "" {
		opts.TrustDomain = DefaultTrustDomain
	}
	if opts.DefaultTTL <= 0 {
		opts.DefaultTTL = DefaultWorkloadTTL
	}
	if opts.MaxTTL <= 0 {
		opts.MaxTTL = DefaultMaxTTL
	}
	if opts.RootTTL <= 0 {
		opts.RootTTL = DefaultRootTTL
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.DefaultTTL > opts.MaxTTL {
		return nil, fmt.Errorf("ca: default workload certificate lifetime %v is longer than the maximum %v", opts.DefaultTTL, opts.MaxTTL)
	}
	if err := (Identity{TrustDomain: opts.TrustDomain, Namespace: "x", ServiceAccount: "x"}).Validate(); err != nil {
		return nil, fmt.Errorf("ca: %w", err)
	}
	if opts.PluggedDir == "" && opts.Dir == "" {
		return nil, errors.New("ca: neither a CA directory nor a plugged-in cacerts directory is set")
	}
	c := &CA{opts: opts, log: opts.Logger.With("component", "ca"), changed: make(chan struct{})}
	if opts.PluggedDir == "" {
		if _, err := os.Stat(filepath.Join(opts.Dir, CertFile)); errors.Is(err, os.ErrNotExist) {
			if err := c.generateRoot(); err != nil {
				return nil, err
			}
		}
	}
	kc, err := c.load()
	if err != nil {
		return nil, err
	}
	c.kc = kc
	c.log.Info("certificate authority ready", "dir", c.dir(), "plugged", kc.plugged, "trust_domain", opts.TrustDomain,
		"roots", len(kc.roots), "ca_expires", kc.cert.NotAfter.UTC())
	return c, nil
}

func (c *CA) dir() string {
	if c.opts.PluggedDir != "" {
		return c.opts.PluggedDir
	}
	return c.opts.Dir
}

// TrustDomain is the trust domain of the identities this CA signs.
func (c *CA) TrustDomain() string { return c.opts.TrustDomain }

// Reload re-reads the CA's directory. On error the CA keeps signing with
// what it had, and the error says what is wrong with the files.
func (c *CA) Reload() error {
	kc, err := c.load()
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.kc = kc
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	c.log.Info("certificate authority reloaded", "dir", c.dir(), "roots", len(kc.roots), "ca_expires", kc.cert.NotAfter.UTC())
	return nil
}

func (c *CA) current() *bundle {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.kc
}

// Changed returns a channel closed at the next successful Reload (the
// trust bundle or the signing CA may have changed).
func (c *CA) Changed() <-chan struct{} {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.changed
}

// TrustBundle is the PEM of every trusted root (root-cert.pem).
func (c *CA) TrustBundle() []byte { return bytes.Clone(c.current().rootsPEM) }

// Roots are the trusted roots, parsed.
func (c *CA) Roots() []*x509.Certificate {
	return append([]*x509.Certificate(nil), c.current().roots...)
}

// RootExpiry is when the first root of the trust bundle expires (Istio's
// citadel_server_root_cert_expiry_timestamp uses the first one too).
func (c *CA) RootExpiry() time.Time { return c.current().roots[0].NotAfter }

// CertChainExpiry is when the signing certificate expires.
func (c *CA) CertChainExpiry() time.Time { return c.current().cert.NotAfter }

// CertPool is the trust bundle as a pool, for TLS clients of the mesh.
func (c *CA) CertPool() *x509.CertPool {
	pool := x509.NewCertPool()
	for _, r := range c.current().roots {
		pool.AddCert(r)
	}
	return pool
}

func (c *CA) generateRoot() error {
	dir := c.opts.Dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("ca: create --ca-dir %s: %w", dir, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("ca: generate root key: %w", err)
	}
	now := c.opts.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{Organization: []string{c.opts.TrustDomain}, CommonName: "Strait root CA"},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(c.opts.RootTTL),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return fmt.Errorf("ca: self-sign root: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("ca: encode root key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	// ca-cert.pem is written last: its presence means the set is complete.
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{KeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600},
		{RootCertFile, certPEM, 0o644},
		{CertFile, certPEM, 0o644},
	} {
		if err := writeFileAtomic(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return fmt.Errorf("ca: %w", err)
		}
	}
	c.log.Info("generated a self-signed root", "dir", dir, "key", "ECDSA P-256", "expires", tmpl.NotAfter.UTC())
	return nil
}

// load reads and checks the CA's files.
func (c *CA) load() (*bundle, error) {
	dir := c.dir()
	plugged := c.opts.PluggedDir != ""
	read := func(name string, required bool) ([]byte, error) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) && !required {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("ca: %w", err)
		}
		return data, nil
	}
	certPEM, err := read(CertFile, true)
	if err != nil {
		return nil, err
	}
	keyPEM, err := read(KeyFile, true)
	if err != nil {
		return nil, err
	}
	rootsPEM, err := read(RootCertFile, true)
	if err != nil {
		return nil, err
	}
	chainPEM, err := read(CertChainFile, plugged)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, CRLFile)); err == nil {
		return nil, fmt.Errorf("ca: %s: certificate revocation lists are not supported by Strait yet (remove it, or revoke by rotating the signing CA)", filepath.Join(dir, CRLFile))
	}
	kc := &bundle{chainPEM: chainPEM, rootsPEM: rootsPEM, plugged: plugged}
	path := func(name string) string { return filepath.Join(dir, name) }

	certs, err := parseCerts(certPEM)
	if err != nil {
		return nil, fmt.Errorf("ca: %s: %w", path(CertFile), err)
	}
	if len(certs) != 1 {
		return nil, fmt.Errorf("ca: %s: holds %d certificates; want exactly one, the signing CA's", path(CertFile), len(certs))
	}
	kc.cert = certs[0]
	if !kc.cert.IsCA || kc.cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("ca: %s is not a CA certificate (want basicConstraints CA:TRUE and keyUsage keyCertSign)", path(CertFile))
	}
	if kc.signer, err = parseKey(keyPEM); err != nil {
		return nil, fmt.Errorf("ca: %s: %w", path(KeyFile), err)
	}
	if !publicKeysEqual(kc.signer.Public(), kc.cert.PublicKey) {
		return nil, fmt.Errorf("ca: %s does not match the public key of %s", path(KeyFile), path(CertFile))
	}
	if kc.roots, err = parseCerts(rootsPEM); err != nil {
		return nil, fmt.Errorf("ca: %s: want one or more PEM root certificates: %w", path(RootCertFile), err)
	}
	if len(bytes.TrimSpace(chainPEM)) > 0 {
		if kc.chain, err = parseCerts(chainPEM); err != nil {
			return nil, fmt.Errorf("ca: %s: want PEM certificates from %s up to the root: %w", path(CertChainFile), CertFile, err)
		}
		if !kc.chain[0].Equal(kc.cert) {
			return nil, fmt.Errorf("ca: %s must start with the certificate of %s", path(CertChainFile), CertFile)
		}
	} else if !isSelfSigned(kc.cert) {
		// An empty cert-chain.pem beside an intermediate (Istio loads
		// that too): the intermediate still has to travel with every leaf,
		// or peers holding only the root cannot verify it.
		kc.chain = []*x509.Certificate{kc.cert}
	}
	now := c.opts.Now()
	if now.After(kc.cert.NotAfter) {
		return nil, fmt.Errorf("ca: %s expired at %s", path(CertFile), kc.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	roots := x509.NewCertPool()
	for _, r := range kc.roots {
		roots.AddCert(r)
	}
	inter := x509.NewCertPool()
	for _, ic := range kc.chain {
		inter.AddCert(ic)
	}
	if _, err := kc.cert.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("ca: %s does not chain to a root of %s (through %s): %w", path(CertFile), path(RootCertFile), path(CertChainFile), err)
	}
	return kc, nil
}

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

// ServingOptions describe a serving certificate for straitd itself.
type ServingOptions struct {
	DNSNames []string
	IPs      []net.IP
	TTL      time.Duration
}

// IssueServing makes a key and a server certificate for straitd's own TLS
// port (15012), signed by this CA, with the chain up to (not including)
// the root.
func (c *CA) IssueServing(o ServingOptions) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ca: serving key: %w", err)
	}
	kc := c.current()
	now := c.opts.Now()
	ttl := o.TTL
	if ttl <= 0 {
		ttl = c.opts.DefaultTTL
	}
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{Organization: []string{c.opts.TrustDomain}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(ttl),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              o.DNSNames,
		IPAddresses:           o.IPs,
	}
	if tmpl.NotAfter.After(kc.cert.NotAfter) {
		tmpl.NotAfter = kc.cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, kc.cert, key.Public(), kc.signer)
	if err != nil {
		return nil, fmt.Errorf("ca: sign serving certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("ca: parse serving certificate: %w", err)
	}
	out := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	for _, ic := range kc.chain {
		if !isSelfSigned(ic) {
			out.Certificate = append(out.Certificate, ic.Raw)
		}
	}
	if len(kc.chain) == 0 && !isSelfSigned(kc.cert) {
		out.Certificate = append(out.Certificate, kc.cert.Raw)
	}
	return out, nil
}

func isSelfSigned(c *x509.Certificate) bool {
	return bytes.Equal(c.RawIssuer, c.RawSubject) && c.CheckSignatureFrom(c) == nil
}

func randomSerial() *big.Int {
	// 128 random bits, as RFC 5280 allows (at most 20 octets, positive).
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // crypto/rand does not fail on Linux
	}
	return n.Add(n, big.NewInt(1))
}

func parseCSR(data []byte) (*x509.CertificateRequest, error) {
	der := data
	if block, _ := pem.Decode(data); block != nil {
		if block.Type != "CERTIFICATE REQUEST" && block.Type != "NEW CERTIFICATE REQUEST" {
			return nil, fmt.Errorf("the CSR's PEM block is %q, want CERTIFICATE REQUEST", block.Type)
		}
		der = block.Bytes
	}
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return nil, fmt.Errorf("the CSR does not parse: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("the CSR's signature does not verify: %w", err)
	}
	switch k := csr.PublicKey.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return nil, fmt.Errorf("the CSR's RSA key has %d bits; want at least 2048", k.N.BitLen())
		}
	case *ecdsa.PublicKey, ed25519.PublicKey:
	default:
		return nil, fmt.Errorf("the CSR's key type %T is not supported (RSA, ECDSA or Ed25519)", k)
	}
	return csr, nil
}

func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	return out, nil
}

func parseKey(data []byte) (crypto.Signer, error) {
	block, rest := pem.Decode(data)
	// openssl ecparam -genkey writes the curve's parameters before the
	// key; they are implied by the key, so skip them as crypto/tls does.
	for block != nil && block.Type == "EC PARAMETERS" {
		block, rest = pem.Decode(rest)
	}
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	var (
		key any
		err error
	)
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("PEM block %q is not a private key (want PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)", block.Type)
	}
	if err != nil {
		return nil, err
	}
	s, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key type %T cannot sign", key)
	}
	return s, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}

// writeFileAtomic writes data to path through a temporary file and a rename,
// so a reader never sees half a file.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
