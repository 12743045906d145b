package file

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/straitmesh/strait/internal/mesh"
)

// credentialDir checks the Gateway credentials of file mode:
// DIR/NAMESPACE/NAME holds a Kubernetes TLS Secret's keys as files
// (tls.crt, tls.key, and ca.crt for MUTUAL, or NAME-cacert/ca.crt as
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
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if errors.Is(err, os.ErrNotExist) {
		ca, err = os.ReadFile(filepath.Join(string(d), ns, name+"-cacert", "ca.crt"))
	}
	if err != nil {
		return fmt.Errorf("MUTUAL needs CA certificates (ca.crt, or ca.crt of %s-cacert): %w", name, err)
	}
	if err := mesh.CheckPEMCertificates(ca); err != nil {
		return fmt.Errorf("ca.crt of %s: %w", name, err)
	}
	return nil
}

var _ mesh.Credentials = credentialDir("")
