package agent

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/agent/settings"
	"github.com/straitmesh/strait/internal/ca"
)

// TestRunIdentityRefusals: the agent does not start half-secured. Istio's
// TLS port without the mesh root, and a certificate request without a
// service account, stop it with the fix named.
func TestRunIdentityRefusals(t *testing.T) {
	authority, err := ca.Load(ca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		withRoot bool
		env      map[string]string
		want     string
	}{
		{"15012 without the root", false, map[string]string{"SERVICE_ACCOUNT": "client"}, "var/run/secrets/istio/root-cert.pem"},
		{"no service account", true, nil, "SERVICE_ACCOUNT: not set"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wd := t.TempDir()
			if tt.withRoot {
				root := filepath.Join(wd, settings.DefaultRootCertPath)
				if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(root, authority.TrustBundle(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			env := map[string]string{"POD_NAME": "client-1", "POD_NAMESPACE": "demo", "INSTANCE_IP": "127.0.0.1",
				"PROXY_CONFIG": `{"discoveryAddress":"127.0.0.1:15012","binaryPath":"/bin/false","configPath":"proxy"}`}
			for k, v := range tt.env {
				env[k] = v
			}
			cfg, err := settings.Load(settings.Sources{
				LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }, Environ: []string{},
				Executable: "/bin/strait-agent", WorkDir: wd,
				MeshConfigFile: filepath.Join(wd, "none"), PodInfoDir: filepath.Join(wd, "none"),
			})
			if err != nil {
				t.Fatal(err)
			}
			err = Run(context.Background(), cfg, Options{StatusHost: "127.0.0.1", Logger: slog.New(slog.DiscardHandler)})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
