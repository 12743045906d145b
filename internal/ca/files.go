package ca

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// This file is the CA's directory: the self-signed root generated into it,
// the cacerts layout loaded and checked from it, and Reload, which a root
// rotation step triggers (from Watch or straitd).

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
