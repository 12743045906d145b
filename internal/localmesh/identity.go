package localmesh

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/straitmesh/strait/internal/ca"
	"github.com/straitmesh/strait/internal/ca/token"
)

// ServiceAccount is the service account of a pod whose Workload names none.
const ServiceAccount = "default"

// writeIdentity puts the mesh root and a workload token where the pod's
// agent looks for them (relative to its working directory, the pod's dir).
func (m *Mesh) writeIdentity(p *Pod) error {
	root, err := os.ReadFile(filepath.Join(m.CADir(), ca.RootCertFile))
	if err != nil {
		return fmt.Errorf("mesh root: %w", err)
	}
	key, err := token.LoadKey(filepath.Join(m.CADir(), token.KeyFile))
	if err != nil {
		return err
	}
	ttl := m.opts.TokenTTL
	if ttl <= 0 {
		ttl = 24 * time.Hour
	}
	now := time.Now()
	tok, err := key.Issue(token.Claims{Namespace: p.Namespace, ServiceAccount: p.serviceAccount(), IssuedAt: now.Unix(), Expiry: now.Add(ttl).Unix()})
	if err != nil {
		return err
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{filepath.Join(p.dir, "var/run/secrets/istio/root-cert.pem"), root, 0o644},
		{filepath.Join(p.dir, "var/run/secrets/tokens/istio-token"), []byte(tok + "\n"), 0o600},
	} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// SDSSocket is the pod's SDS socket (the agent's workload socket).
func (p *Pod) SDSSocket() string {
	return filepath.Join(p.dir, "var/run/secrets/workload-spiffe-uds/socket")
}
