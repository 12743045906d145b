// Package sds is the agent's workload identity: it keeps a key and a
// certificate from straitd's CA (Rotator), renews the certificate before it
// expires, and serves both to the proxy over Envoy's Secret Discovery
// Service on Istio's workload socket (Server): the resource "default" is
// the key and certificate chain, "ROOTCA" the trust bundle. A renewal is
// pushed on every open SDS stream.
package sds

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Resource names Istio's proxies ask for.
const (
	ResourceDefault = "default"
	ResourceRootCA  = "ROOTCA"
)

// Secrets are one issued certificate with its key and the trust bundle.
// Never modified once stored.
type Secrets struct {
	// Version changes with every renewal (the SDS version_info).
	Version string
	// CertChainPEM is the leaf and the intermediates, KeyPEM its key,
	// RootPEM the trust bundle (every root).
	CertChainPEM, KeyPEM, RootPEM []byte
	Leaf                          *x509.Certificate
	Roots                         []*x509.Certificate
	// IssuedAt is when the agent received it.
	IssuedAt time.Time
}

// newSecrets splits a CA response (leaf first, trust bundle last) and
// checks that the leaf verifies against the bundle.
func newSecrets(version string, chain []string, keyPEM []byte, now time.Time) (*Secrets, error) {
	if len(chain) < 2 {
		return nil, errors.New("certificate chain: want the leaf and the root at least")
	}
	s := &Secrets{Version: version, KeyPEM: keyPEM, RootPEM: []byte(chain[len(chain)-1]), IssuedAt: now}
	inter := x509.NewCertPool()
	for i, part := range chain[:len(chain)-1] {
		certs, err := parsePEMCerts([]byte(part))
		if err != nil {
			return nil, fmt.Errorf("certificate chain element %d: %w", i, err)
		}
		if i == 0 {
			s.Leaf = certs[0]
		}
		for _, c := range certs {
			if i > 0 {
				inter.AddCert(c)
			}
			s.CertChainPEM = append(s.CertChainPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
		}
	}
	roots, err := parsePEMCerts(s.RootPEM)
	if err != nil {
		return nil, fmt.Errorf("trust bundle (last element of the chain): %w", err)
	}
	s.Roots = roots
	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	if _, err := s.Leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("the issued certificate does not verify against the trust bundle: %w", err)
	}
	return s, nil
}

func parsePEMCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}

// Fingerprint is a certificate's SHA-256 fingerprint, hex.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// Store holds the current Secrets and wakes watchers when they change.
// Safe for concurrent use.
type Store struct {
	mu      sync.Mutex // guards cur and changed
	cur     *Secrets
	changed chan struct{} // closed and replaced on every Set
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{changed: make(chan struct{})} }

// Current returns the secrets (nil before the first certificate) and a
// channel closed at the next change.
func (s *Store) Current() (*Secrets, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.changed
}

// Set replaces the secrets and wakes every watcher.
func (s *Store) Set(sec *Secrets) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = sec
	close(s.changed)
	s.changed = make(chan struct{})
}
