package settings

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadIdentity(t *testing.T) {
	rootDir := t.TempDir()
	existing := filepath.Join(rootDir, "root-cert.pem")
	if err := os.WriteFile(existing, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	pc := func(addr string) string { return `{"discoveryAddress":"` + addr + `"}` }
	for _, tt := range []struct {
		name            string
		env             map[string]string
		wantXDS, wantCA string
		wantCAAddr      string
	}{
		{name: "Istio's default 15012: TLS with the mounted root", env: nil, wantXDS: "/work/var/run/secrets/istio/root-cert.pem", wantCA: "/work/var/run/secrets/istio/root-cert.pem", wantCAAddr: "istiod.istio-system.svc:15012"},
		{name: "15010 is plaintext even with a root", env: map[string]string{"PROXY_CONFIG": pc("straitd:15010"), "XDS_ROOT_CA": existing}, wantCAAddr: "straitd:15010"},
		{name: "other port without a root: plaintext", env: map[string]string{"PROXY_CONFIG": pc("10.0.0.1:9000")}, wantCAAddr: "10.0.0.1:9000"},
		{name: "other port with an explicit root", env: map[string]string{"PROXY_CONFIG": pc("10.0.0.1:9000"), "XDS_ROOT_CA": existing, "CA_ROOT_CA": existing}, wantXDS: existing, wantCA: existing, wantCAAddr: "10.0.0.1:9000"},
		{name: "CA elsewhere", env: map[string]string{"PROXY_CONFIG": pc("straitd:15010"), "CA_ADDR": "ca.example:15012"}, wantCA: "/work/var/run/secrets/istio/root-cert.pem", wantCAAddr: "ca.example:15012"},
		{name: "relative explicit root", env: map[string]string{"PROXY_CONFIG": pc("h:9"), "XDS_ROOT_CA": "certs/r.pem"}, wantXDS: "/work/certs/r.pem", wantCAAddr: "h:9"},
	} {
		c, err := fixture{env: tt.env}.load(t)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		id := c.Identity
		if id.XDSRootCert != tt.wantXDS || id.CARootCert != tt.wantCA || id.CAAddress != tt.wantCAAddr {
			t.Errorf("%s: xds root %q, ca root %q, ca %q; want %q %q %q", tt.name, id.XDSRootCert, id.CARootCert, id.CAAddress, tt.wantXDS, tt.wantCA, tt.wantCAAddr)
		}
		if id.CertificatesEnabled() != (tt.wantCA != "") {
			t.Errorf("%s: certificates enabled %v", tt.name, id.CertificatesEnabled())
		}
	}

	c, err := fixture{}.load(t)
	if err != nil {
		t.Fatal(err)
	}
	if c.Identity.TrustDomain != "cluster.local" || c.Identity.SecretTTL != 24*time.Hour ||
		c.Identity.TokenPath != "/work/var/run/secrets/tokens/istio-token" || c.Identity.WorkloadSocketPath != "/work/var/run/secrets/workload-spiffe-uds/socket" {
		t.Errorf("defaults: %+v", c.Identity)
	}
	c, err = fixture{env: map[string]string{"TRUST_DOMAIN": "corp.example", "SECRET_TTL": "90s", "JWT_POLICY": "first-party-jwt", "PILOT_CERT_PROVIDER": "istiod"}}.load(t)
	if err != nil {
		t.Fatal(err)
	}
	if c.Identity.TrustDomain != "corp.example" || c.Identity.SecretTTL != 90*time.Second || c.Identity.TokenPath != FirstPartyTokenPath {
		t.Errorf("from env: %+v", c.Identity)
	}
	for env, want := range map[string]string{"SECRET_TTL": `SECRET_TTL: "-1s" is not a positive duration`, "JWT_POLICY": `JWT_POLICY: "-1s" is not supported`} {
		if _, err := (fixture{env: map[string]string{env: "-1s"}}).load(t); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s=-1s: %v, want %q", env, err, want)
		}
	}
	// Istio's other certificate providers change which root the agent
	// trusts for the control plane; Strait implements istiod only.
	for _, p := range []string{"kubernetes", "k8s.io/my-signer", "custom", "none"} {
		want := `PILOT_CERT_PROVIDER: "` + p + `" is not supported by Strait (only istiod`
		if _, err := (fixture{env: map[string]string{"PILOT_CERT_PROVIDER": p}}).load(t); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("PILOT_CERT_PROVIDER=%s: %v, want %q", p, err, want)
		}
	}
}

// TestSecretTTLZero: a zero SECRET_TTL is refused like a negative one (a
// certificate valid for no time).
func TestSecretTTLZero(t *testing.T) {
	want := `SECRET_TTL: "0s" is not a positive duration`
	if _, err := (fixture{env: map[string]string{"SECRET_TTL": "0s"}}).load(t); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("SECRET_TTL=0s: %v, want %q", err, want)
	}
}

// TestTLSRoot: the root the agent trusts for a control-plane address:
// none on Istio's plaintext port 15010 (even if one is named), the named
// one elsewhere, the default on 15012 whether or not it exists yet, and
// on another port the default only when the file exists.
func TestTLSRoot(t *testing.T) {
	dir := t.TempDir()
	present := filepath.Join(dir, "root-cert.pem")
	if err := os.WriteFile(present, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	absent := filepath.Join(dir, "absent.pem")
	for _, tc := range []struct {
		addr, explicit, def string
		want                string
		wantErr             string
	}{
		{"", "/x.pem", present, "", ""},
		{"straitd:15010", "/x.pem", present, "", ""},
		{"straitd:15012", "/x.pem", present, "/x.pem", ""},
		{"straitd:15012", "", absent, absent, ""},
		{"straitd:8443", "/x.pem", absent, "/x.pem", ""},
		{"straitd:8443", "", present, present, ""},
		{"straitd:8443", "", absent, "", ""},
		{"straitd", "", present, "", `"straitd" is not host:port`},
	} {
		got, err := tlsRoot(tc.addr, tc.explicit, tc.def)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("tlsRoot(%q, %q, %q): err %v, want %q", tc.addr, tc.explicit, tc.def, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("tlsRoot(%q, %q, %q) = %q, %v; want %q", tc.addr, tc.explicit, tc.def, got, err, tc.want)
		}
	}
}
