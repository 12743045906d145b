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
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
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
