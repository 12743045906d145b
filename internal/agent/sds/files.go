package sds

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/straitmesh/strait/internal/certpem"
)

// File-backed secrets, named as Istio names them (pkg/security
// SdsCertificateConfig.GetResourceName / GetRootResourceName): a
// DestinationRule's clientCertificate/privateKey become
// "file-cert:CERT~KEY" and its caCertificates "file-root:CA", paths on the
// workload's host that the agent reads and serves inline, so that the
// proxy never reads them itself and a rewritten file reaches it as an SDS
// push. "file-root:system" is the host's own trust bundle (Istio's
// security.FileRootSystemCACert), used when a rule names no CA.
const (
	fileCertPrefix = "file-cert:"
	fileRootPrefix = "file-root:"
	fileRootSystem = "system"
	fileSeparator  = "~"
)

// Gateway credentials: a Gateway's tls.credentialName NAME is the SDS
// resource "kubernetes://NAME" (its CA certificates for MUTUAL
// "kubernetes://NAME-cacert"), as Istio names them
// (pilot/pkg/model/credentials). Istio's agent asks istiod, which reads
// the Kubernetes Secret; strait-agent reads them from files laid out as a
// Kubernetes TLS Secret mounted as a volume: CREDENTIALS_DIR/NAME/tls.crt
// and tls.key, and CREDENTIALS_DIR/NAME/ca.crt (or, as Istio's separate
// CA Secret, CREDENTIALS_DIR/NAME-cacert/ca.crt), with the revocation
// list beside it when there is one (ca.crl, as a TLS Secret's key),
// served in the same validation context as Istio's agent does.
const (
	credentialPrefix = "kubernetes://"
	credentialCA     = "-cacert"
)

// credentialResource is the fileResource of a "kubernetes://" name under
// dir; ok is false for another name, err says why a credential cannot be
// served.
func credentialResource(dir, name string) (r fileResource, ok bool, err error) {
	rest, found := strings.CutPrefix(name, credentialPrefix)
	if !found {
		return r, false, nil
	}
	if dir == "" {
		return r, true, fmt.Errorf("SDS resource %q: this agent has no credentials directory", name)
	}
	if rest == "" || strings.ContainsAny(rest, "/\\") || rest == "." || rest == ".." {
		return r, true, fmt.Errorf("SDS resource %q: want %sNAME, NAME a Secret's name", name, credentialPrefix)
	}
	if base, isCA := strings.CutSuffix(rest, credentialCA); isCA && base != "" {
		// NAME-cacert: NAME's ca.crt, else a credential of its own.
		caDir := filepath.Join(dir, base)
		if _, err := os.Stat(filepath.Join(caDir, "ca.crt")); err != nil {
			caDir = filepath.Join(dir, rest)
		}
		return fileResource{root: filepath.Join(caDir, "ca.crt"), crl: filepath.Join(caDir, "ca.crl")}, true, nil
	}
	return fileResource{cert: filepath.Join(dir, rest, "tls.crt"), key: filepath.Join(dir, rest, "tls.key")}, true, nil
}

// systemBundles are where Linux distributions keep the system trust
// bundle (the list crypto/x509 searches on Linux); the first that exists
// is "file-root:system".
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL 6
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/tls/cacert.pem",                           // OpenELEC
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
	"/etc/ssl/cert.pem",                                 // Alpine
}

// fileResource is a parsed file-backed resource name: cert and key for
// "file-cert:", root for "file-root:", and for a Gateway credential's CA
// the path of its revocation list (crl), served when the file is there.
type fileResource struct {
	cert, key, root, crl string
}

// parseFileResource parses a file-backed resource name; ok is false for
// a name that is not one, err names what is wrong with one that is
// malformed.
func parseFileResource(name string) (r fileResource, ok bool, err error) {
	if rest, found := strings.CutPrefix(name, fileCertPrefix); found {
		cert, key, two := strings.Cut(rest, fileSeparator)
		if !two || cert == "" || key == "" || strings.Contains(key, fileSeparator) {
			return r, true, fmt.Errorf("SDS resource %q: want %sCERT_PATH%sKEY_PATH", name, fileCertPrefix, fileSeparator)
		}
		return fileResource{cert: cert, key: key}, true, nil
	}
	if rest, found := strings.CutPrefix(name, fileRootPrefix); found {
		if rest == "" || strings.Contains(rest, fileSeparator) {
			return r, true, fmt.Errorf("SDS resource %q: want %sCA_PATH (one file) or %s%s", name, fileRootPrefix, fileRootPrefix, fileRootSystem)
		}
		return fileResource{root: rest}, true, nil
	}
	return r, false, nil
}

// read loads the files of r and returns the secret named name and the
// bytes read (to version the response). A certificate must match its key
// and a CA file must hold a certificate, so the proxy never receives a
// secret it would reject.
func (r fileResource) read(name string) (*tlsv3.Secret, []byte, error) {
	inline := func(b []byte) *core.DataSource {
		return &core.DataSource{Specifier: &core.DataSource_InlineBytes{InlineBytes: b}}
	}
	if r.root != "" {
		path := r.root
		if path == fileRootSystem {
			p, err := systemBundle()
			if err != nil {
				return nil, nil, fmt.Errorf("SDS resource %q: %w", name, err)
			}
			path = p
		}
		pem, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("SDS resource %q: CA certificates: %w", name, err)
		}
		if _, err := parsePEMCerts(pem); err != nil {
			return nil, nil, fmt.Errorf("SDS resource %q: CA certificates %s: %w", name, path, err)
		}
		vc := &tlsv3.CertificateValidationContext{TrustedCa: inline(pem)}
		raw := pem
		if r.crl != "" {
			crl, err := os.ReadFile(r.crl)
			switch {
			case errors.Is(err, os.ErrNotExist):
			case err != nil:
				return nil, nil, fmt.Errorf("SDS resource %q: revocation list: %w", name, err)
			default:
				if _, err := certpem.ParseCRLs(crl); err != nil {
					return nil, nil, fmt.Errorf("SDS resource %q: revocation list %s: %w", name, r.crl, err)
				}
				vc.Crl = inline(crl)
				raw = append(append(raw[:len(raw):len(raw)], 0), crl...)
			}
		}
		return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_ValidationContext{ValidationContext: vc}}, raw, nil
	}
	cert, err := os.ReadFile(r.cert)
	if err != nil {
		return nil, nil, fmt.Errorf("SDS resource %q: client certificate: %w", name, err)
	}
	key, err := os.ReadFile(r.key)
	if err != nil {
		return nil, nil, fmt.Errorf("SDS resource %q: private key: %w", name, err)
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		return nil, nil, fmt.Errorf("SDS resource %q: certificate %s with key %s: %w", name, r.cert, r.key, err)
	}
	return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inline(cert),
		PrivateKey:       inline(key),
	}}}, append(cert, key...), nil
}

// systemBundle is the path of the host's trust bundle.
func systemBundle() (string, error) {
	for _, p := range systemBundles {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no system trust bundle found (looked in " + strings.Join(systemBundles, ", ") +
		"); install ca-certificates or set the DestinationRule's tls.caCertificates")
}
