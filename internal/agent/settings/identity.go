package settings

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Environment and paths of the workload identity, as Istio's pilot-agent
// reads them (pilot/cmd/pilot-agent/options). Relative paths are relative
// to the agent's working directory, as Istio's are (its cwd is /).
const (
	EnvCAAddr      = "CA_ADDR"      // the CA's address (default discoveryAddress)
	EnvTrustDomain = "TRUST_DOMAIN" // default cluster.local
	EnvSecretTTL   = "SECRET_TTL"   // requested certificate lifetime (default 24h)
	EnvXDSRootCA   = "XDS_ROOT_CA"  // root for the xDS connection (a PEM file)
	EnvCARootCA    = "CA_ROOT_CA"   // root for the CA connection (a PEM file)
	EnvJWTPolicy   = "JWT_POLICY"   // third-party-jwt (default) or first-party-jwt
	// EnvPilotCertProvider says who signs the control plane's serving
	// certificate, and so which root the agent trusts for it. Only
	// istiod (straitd's own CA, the root at DefaultRootCertPath) is
	// implemented; Istio's kubernetes, k8s.io/<signer>, custom and none
	// are refused by name.
	EnvPilotCertProvider = "PILOT_CERT_PROVIDER"
	// EnvIstiodSAN overrides the server name checked on the xDS and CA
	// connections (when the address is an IP the certificate lacks).
	EnvIstiodSAN = "ISTIOD_SAN"

	// DefaultRootCertPath is where Istio's injected pod mounts the mesh
	// root (the istio-ca-root-cert ConfigMap).
	DefaultRootCertPath = "./var/run/secrets/istio/root-cert.pem"
	// ThirdPartyTokenPath is the projected service-account token for
	// audience istio-ca; in file mode, the token from straitctl token create.
	ThirdPartyTokenPath = "./var/run/secrets/tokens/istio-token"
	// FirstPartyTokenPath is the legacy service-account token.
	FirstPartyTokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	// WorkloadSocketPath is Istio's SDS socket for the proxy.
	WorkloadSocketPath = "./var/run/secrets/workload-spiffe-uds/socket"
	// CredentialsPath is where a gateway's agent reads the credentials
	// its Gateways name (tls.credentialName NAME: NAME/tls.crt, tls.key,
	// ca.crt, a Kubernetes TLS Secret's keys) unless CREDENTIALS_DIR says
	// otherwise.
	CredentialsPath = "./var/run/secrets/credentials"
	// EnvCredentialsDir overrides CredentialsPath.
	EnvCredentialsDir = "CREDENTIALS_DIR"

	// PlaintextPort and SecurePort are Istio's xDS ports: 15010 is always
	// plaintext, 15012 always TLS.
	PlaintextPort = "15010"
	SecurePort    = "15012"

	DefaultTrustDomain = "cluster.local"
	DefaultSecretTTL   = 24 * time.Hour
)

// Identity is how the agent gets its workload certificate and how it
// reaches the control plane.
type Identity struct {
	// XDSRootCert is the PEM root the xDS connection trusts; "" means the
	// xDS connection is plaintext.
	XDSRootCert string
	// CAAddress is where certificates are requested (CA_ADDR, else
	// discoveryAddress); CARootCert its root, "" when it is plaintext, in
	// which case the agent requests no certificate (its SDS serves only
	// file-backed secrets).
	CAAddress  string
	CARootCert string
	// TrustDomain, with POD_NAMESPACE and SERVICE_ACCOUNT, makes the SPIFFE ID.
	TrustDomain string
	// SecretTTL is the certificate lifetime requested.
	SecretTTL time.Duration
	// TokenPath is the bearer token sent with certificate requests.
	TokenPath string
	// WorkloadSocketPath is the SDS socket (absolute).
	WorkloadSocketPath string
	// CredentialsDir holds the Gateway credentials the SDS server serves
	// as kubernetes://NAME (absolute; CREDENTIALS_DIR, else
	// CredentialsPath).
	CredentialsDir string
	// ServerName is checked in the control plane's certificate instead of
	// the address's host (ISTIOD_SAN); "" = the host.
	ServerName string
}

// CertificatesEnabled reports whether the agent requests a certificate
// and serves SDS: only over TLS to the CA.
func (id Identity) CertificatesEnabled() bool { return id.CARootCert != "" }

// loadIdentity fills c.Identity. Whether a connection is TLS:
//   - port 15010: plaintext (Istio's plaintext port), whatever else is set;
//   - an explicit root (XDS_ROOT_CA / CA_ROOT_CA): TLS, trusting it;
//   - port 15012: TLS, trusting ./var/run/secrets/istio/root-cert.pem
//     (the file is read when the agent starts; a missing one is an error then);
//   - otherwise TLS if that root file exists, else plaintext.
func loadIdentity(c *Config, env func(string) string, wd string) error {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(wd, p)
	}
	var errs []error
	id := Identity{TrustDomain: env(EnvTrustDomain), SecretTTL: DefaultSecretTTL, WorkloadSocketPath: abs(WorkloadSocketPath), ServerName: env(EnvIstiodSAN),
		CredentialsDir: abs(cmp.Or(env(EnvCredentialsDir), CredentialsPath))}
	if id.TrustDomain == "" {
		id.TrustDomain = DefaultTrustDomain
	}
	if v := env(EnvSecretTTL); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a positive duration (e.g. \"24h\")", EnvSecretTTL, v))
		}
		id.SecretTTL = d
	}
	switch p := env(EnvJWTPolicy); p {
	case "", "third-party-jwt":
		id.TokenPath = abs(ThirdPartyTokenPath)
	case "first-party-jwt":
		id.TokenPath = FirstPartyTokenPath
	default:
		errs = append(errs, fmt.Errorf("%s: %q is not supported (third-party-jwt or first-party-jwt)", EnvJWTPolicy, p))
	}
	switch p := env(EnvPilotCertProvider); p {
	case "", "istiod":
	default:
		errs = append(errs, fmt.Errorf("%s: %q is not supported by Strait (only istiod: straitd's CA signs its own certificate, trusted through %s)", EnvPilotCertProvider, p, DefaultRootCertPath))
	}
	defaultRoot := abs(DefaultRootCertPath)
	xdsAddr := ""
	if c.Proxy != nil {
		xdsAddr = c.Proxy.GetDiscoveryAddress()
	}
	var err error
	if id.XDSRootCert, err = tlsRoot(xdsAddr, abs(env(EnvXDSRootCA)), defaultRoot); err != nil {
		errs = append(errs, fmt.Errorf("discoveryAddress: %w", err))
	}
	id.CAAddress = env(EnvCAAddr)
	if id.CAAddress == "" {
		id.CAAddress = xdsAddr
	}
	if id.CARootCert, err = tlsRoot(id.CAAddress, abs(env(EnvCARootCA)), defaultRoot); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", EnvCAAddr, err))
	}
	c.Identity = id
	return errors.Join(errs...)
}

func tlsRoot(addr, explicit, defaultRoot string) (string, error) {
	if addr == "" {
		return "", nil // discoveryAddress is validated on its own
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	switch {
	case port == PlaintextPort:
		return "", nil
	case explicit != "":
		return explicit, nil
	case port == SecurePort:
		return defaultRoot, nil
	}
	if _, err := os.Stat(defaultRoot); err == nil {
		return defaultRoot, nil
	}
	return "", nil
}
