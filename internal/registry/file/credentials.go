package file

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/straitmesh/strait/internal/certpem"
	"github.com/straitmesh/strait/internal/mesh"
)

// credentialDir checks the Gateway credentials of file mode:
// DIR/NAMESPACE/NAME holds a Kubernetes TLS Secret's keys as files
// (tls.crt, tls.key, and ca.crt with an optional ca.crl for MUTUAL, or NAME-cacert/ca.crt as
// Istio's separate CA Secret), the layout `straitctl local up` copies
// into a gateway pod, whose agent serves it over SDS
// (internal/agent/sds files.go). It tells straitd which servers can be
// served (mesh.Credentials); it never serves the keys itself.
type credentialDir string

// Check implements mesh.Credentials.
func (d credentialDir) Check(ns, name string, mutual bool) error {
	if name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
		return fmt.Errorf("credentialName %q is not a Secret's name", name)
	}
	dir := filepath.Join(string(d), ns, name)
	cert, err := os.ReadFile(filepath.Join(dir, "tls.crt"))
	if err != nil {
		return fmt.Errorf("no certificate: %w", err)
	}
	key, err := os.ReadFile(filepath.Join(dir, "tls.key"))
	if err != nil {
		return fmt.Errorf("no private key: %w", err)
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		return fmt.Errorf("tls.crt and tls.key of %s: %w", dir, err)
	}
	if !mutual {
		return nil
	}
	caDir := dir
	ca, err := os.ReadFile(filepath.Join(caDir, "ca.crt"))
	if errors.Is(err, os.ErrNotExist) {
		caDir = filepath.Join(string(d), ns, name+"-cacert")
		ca, err = os.ReadFile(filepath.Join(caDir, "ca.crt"))
	}
	if err != nil {
		return fmt.Errorf("MUTUAL needs CA certificates (ca.crt, or ca.crt of %s-cacert): %w", name, err)
	}
	if err := mesh.CheckPEMCertificates(ca); err != nil {
		return fmt.Errorf("ca.crt of %s: %w", name, err)
	}
	// The revocation list beside the CA certificates, as a TLS Secret's
	// ca.crl: the agent serves it with them.
	crl, err := os.ReadFile(filepath.Join(caDir, "ca.crl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ca.crl of %s: %w", name, err)
	}
	if _, err := certpem.ParseCRLs(crl); err != nil {
		return fmt.Errorf("ca.crl of %s: %w", filepath.Base(caDir), err)
	}
	return nil
}

var _ mesh.Credentials = credentialDir("")
