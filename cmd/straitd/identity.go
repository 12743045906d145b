package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/straitmesh/strait/internal/ca"
	"github.com/straitmesh/strait/internal/ca/kuberoot"
	caserver "github.com/straitmesh/strait/internal/ca/server"
	"github.com/straitmesh/strait/internal/ca/token"
	"github.com/straitmesh/strait/internal/inject"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/xds"
)

// identityFlags configure the CA and the TLS port (15012) that serves it
// together with xDS.
type identityFlags struct {
	secureXDSAddr string // --secure-xds-addr; empty: no TLS port, no CA
	caDir         string // --ca-dir: self-signed root and token key
	cacertsDir    string // --cacerts-dir: plugged-in CA, used when it holds ca-key.pem
	// cacertsDirSet: --cacerts-dir given explicitly; then a directory
	// without ca-key.pem is an error rather than a silent fallback to
	// the self-signed root.
	cacertsDirSet bool
	trustDomain   string // --trust-domain
	// trustDomainSet: --trust-domain given explicitly; else the mesh
	// config's trustDomain is the CA's.
	trustDomainSet bool
	workloadTTL    time.Duration
	maxTTL         time.Duration
	tlsSANs        []string // --tls-san: extra names of the serving certificate

	secureLis net.Listener // tests: the TLS listener instead of secureXDSAddr
}

func addIdentityFlags(fs *pflag.FlagSet, f *identityFlags) {
	fs.StringVar(&f.secureXDSAddr, "secure-xds-addr", ":15012", "address of the TLS gRPC server: xDS and Istio's certificate API (IstioCertificateService), with a serving certificate from straitd's CA; empty disables both the port and the CA")
	fs.StringVar(&f.caDir, "ca-dir", ca.DefaultDir, "directory of the CA's state: the self-signed root (ca-cert.pem, ca-key.pem, root-cert.pem; generated on first start) and the key of file-mode workload tokens ("+token.KeyFile+")")
	fs.StringVar(&f.cacertsDir, "cacerts-dir", "/etc/cacerts", "plugged-in CA in Istio's cacerts layout (ca-cert.pem, ca-key.pem, cert-chain.pem, root-cert.pem); used instead of the self-signed root when it holds ca-key.pem (given explicitly, a missing directory or one with cacerts files but no ca-key.pem is an error; an empty cert-chain.pem means ca-cert.pem is sent as the chain)")
	fs.StringVar(&f.trustDomain, "trust-domain", ca.DefaultTrustDomain, "trust domain of the workload SPIFFE IDs, spiffe://<trust domain>/ns/<namespace>/sa/<service account>; default: the mesh config's trustDomain (sidecars accept peers of that trust domain only, so the two must agree)")
	fs.DurationVar(&f.workloadTTL, "workload-cert-ttl", ca.DefaultWorkloadTTL, "lifetime of a workload certificate whose request asks for none (Istio's DEFAULT_WORKLOAD_CERT_TTL)")
	fs.DurationVar(&f.maxTTL, "max-workload-cert-ttl", ca.DefaultMaxTTL, "longest workload certificate lifetime granted; longer requests are refused (Istio's MAX_WORKLOAD_CERT_TTL)")
	fs.StringSliceVar(&f.tlsSANs, "tls-san", nil, "extra DNS names or IP addresses of the TLS port's serving certificate (it always has straitd's and istiod's Service names, localhost, loopback, the host name and the listen address)")
}

// secureServer is the TLS gRPC server on 15012 and the CA behind it.
type secureServer struct {
	grpc *grpc.Server
	lis  net.Listener
	ca   *ca.CA
	// authn checks bearer tokens: the certificate service's and the
	// monitoring port's debug endpoints (debugGuard).
	authn []caserver.Authenticator
	// rootPublisher writes istio-ca-root-cert into every namespace
	// (Kubernetes mode only; nil otherwise).
	rootPublisher *kuberoot.Publisher
}

// newSecureServer loads (or creates) the CA and builds the TLS server with
// the certificate service. The caller registers xDS on it too.
func newSecureServer(f flags, kubeConfig *rest.Config, reg prometheus.Registerer, logger *slog.Logger) (*secureServer, error) {
	idf := f.identity
	if idf.workloadTTL <= 0 || idf.maxTTL <= 0 {
		return nil, fmt.Errorf("--workload-cert-ttl %v / --max-workload-cert-ttl %v: want positive durations (e.g. 24h)", idf.workloadTTL, idf.maxTTL)
	}
	if idf.workloadTTL > idf.maxTTL {
		return nil, fmt.Errorf("--workload-cert-ttl %v is longer than --max-workload-cert-ttl %v", idf.workloadTTL, idf.maxTTL)
	}
	if err := (ca.Identity{TrustDomain: idf.trustDomain, Namespace: "ns", ServiceAccount: "sa"}).Validate(); err != nil {
		return nil, fmt.Errorf("--trust-domain %q: %w", idf.trustDomain, err)
	}
	opts := ca.Options{Dir: idf.caDir, TrustDomain: idf.trustDomain, DefaultTTL: idf.workloadTTL, MaxTTL: idf.maxTTL, Logger: logger}
	if idf.cacertsDir != "" {
		plugged, err := pluggedCADir(idf.cacertsDir, idf.cacertsDirSet, logger)
		if err != nil {
			return nil, err
		}
		opts.PluggedDir = plugged
	}
	authority, err := ca.Load(opts)
	if err != nil {
		return nil, fmt.Errorf("--ca-dir/--cacerts-dir: %w", err)
	}
	key, err := token.LoadOrCreateKey(filepath.Join(idf.caDir, token.KeyFile))
	if err != nil {
		return nil, fmt.Errorf("--ca-dir: %w", err)
	}
	authn := []caserver.Authenticator{caserver.FileTokens{Key: key}}
	var publisher *kuberoot.Publisher
	if kubeConfig != nil {
		kc, err := kubernetes.NewForConfig(kubeConfig)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client for TokenReview: %w", err)
		}
		authn = append(authn, caserver.KubeTokens{Client: kc})
		publisher = kuberoot.New(kuberoot.Options{Client: kc, Bundle: authority.TrustBundle, Changed: authority.Changed, Logger: logger})
	}
	// An agent renews with the certificate it holds (see
	// caserver.ClientCerts), so its token need only last until the first.
	clientCerts := &caserver.ClientCerts{Roots: authority.Roots, TrustDomain: authority.TrustDomain}
	certService, err := caserver.New(caserver.Options{CA: authority, Authenticators: authn, ClientCerts: clientCerts, Registry: reg, Logger: logger})
	if err != nil {
		return nil, err
	}
	lis := idf.secureLis
	if lis == nil {
		if lis, err = net.Listen("tcp", idf.secureXDSAddr); err != nil {
			return nil, fmt.Errorf("--secure-xds-addr: %w", err)
		}
	}
	serving, err := ca.NewServingCert(authority, servingNames(f.namespace, lis.Addr(), idf.tlsSANs))
	if err != nil {
		lis.Close()
		return nil, err
	}
	// Client certificates are asked for, not required (a workload's first
	// request has only its token), and verified by clientCerts against
	// the trust bundle of the moment rather than by crypto/tls against a
	// fixed pool; the handshake still proves the key is held.
	tlsConfig := &tls.Config{GetCertificate: serving.GetCertificate, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
	g := grpc.NewServer(append(xds.ServerOptions(), grpc.Creds(credentials.NewTLS(tlsConfig)))...)
	certService.Register(g)
	return &secureServer{grpc: g, lis: lis, ca: authority, authn: authn, rootPublisher: publisher}, nil
}

// pluggedCADir decides whether dir holds a plugged-in CA: it does when
// ca-key.pem is there. Like istiod, straitd otherwise uses its self-signed
// root; a directory without any cacerts file (the mount of an optional
// Secret that does not exist) is that case too. But a directory that
// holds some cacerts files without ca-key.pem is a CA left half done: that
// is an error when --cacerts-dir was given (and so is a directory that
// does not exist), and a warning for the default. Istio's other layout,
// tls.crt/tls.key/ca.crt, is refused by name in either case.
func pluggedCADir(dir string, explicit bool, logger *slog.Logger) (string, error) {
	keyPath := filepath.Join(dir, ca.KeyFile)
	if _, err := os.Stat(keyPath); err == nil {
		return dir, nil
	}
	if _, err := os.Stat(dir); err != nil {
		if explicit {
			return "", fmt.Errorf("--cacerts-dir: %w", err)
		}
		return "", nil
	}
	// istiod also reads a kubernetes.io/tls Secret's files (tls.crt,
	// tls.key, ca.crt) as its signing CA; falling back to a self-signed
	// root would hand workloads a root their operator never chose.
	if _, err := os.Stat(filepath.Join(dir, "tls.key")); err == nil {
		return "", fmt.Errorf("--cacerts-dir: %s holds tls.key, the kubernetes.io/tls layout of a signing CA, which Strait does not read yet; provide %s, %s, %s and %s",
			dir, ca.CertFile, ca.KeyFile, ca.CertChainFile, ca.RootCertFile)
	}
	for _, name := range []string{ca.CertFile, ca.CertChainFile, ca.RootCertFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			continue
		}
		if explicit {
			return "", fmt.Errorf("--cacerts-dir: %s holds %s but no %s (a plugged-in CA needs %s, %s, %s and %s)",
				dir, name, ca.KeyFile, ca.CertFile, ca.KeyFile, ca.CertChainFile, ca.RootCertFile)
		}
		logger.Warn("plugged-in CA directory has no key; using the self-signed root", "component", "ca",
			"dir", dir, "missing", keyPath, "found", name)
		return "", nil
	}
	return "", nil
}

// servingNames are the SANs of straitd's serving certificate: the Service
// names agents dial on Kubernetes (istiod.<ns>.svc, as Istio's injected
// pods use, and straitd.<ns>.svc), localhost, loopback, this host's name,
// the listen address when it is a specific IP, and --tls-san.
func servingNames(namespace string, addr net.Addr, extra []string) ca.ServingOptions {
	o := ca.ServingOptions{DNSNames: inject.ServiceDNSNames(namespace), IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}}
	if h, err := os.Hostname(); err == nil && h != "" {
		o.DNSNames = append(o.DNSNames, h)
	}
	if ta, ok := addr.(*net.TCPAddr); ok && !ta.IP.IsUnspecified() && !ta.IP.IsLoopback() {
		o.IPs = append(o.IPs, ta.IP)
	}
	for _, s := range extra {
		if ip := net.ParseIP(s); ip != nil {
			o.IPs = append(o.IPs, ip)
		} else {
			o.DNSNames = append(o.DNSNames, s)
		}
	}
	return o
}

// serve runs the TLS server until ctx is done.
func (s *secureServer) serve(ctx context.Context) error {
	defer context.AfterFunc(ctx, s.grpc.Stop)()
	if err := s.grpc.Serve(s.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// resolveTrustDomain makes the CA sign identities of the mesh's trust
// domain: the mesh config's trustDomain (default cluster.local) unless
// --trust-domain says otherwise, in which case the two must agree, since
// sidecars accept peers of the mesh config's trust domain only.
func resolveTrustDomain(idf *identityFlags, mesh *meshconfig.Config) error {
	if !idf.trustDomainSet {
		idf.trustDomain = mesh.TrustDomain
		return nil
	}
	if idf.trustDomain != mesh.TrustDomain {
		return fmt.Errorf("--trust-domain %q differs from the mesh config's trustDomain %q: sidecars would refuse every certificate the CA signs; set trustDomain: %s in the mesh config (--mesh) or drop --trust-domain",
			idf.trustDomain, mesh.TrustDomain, idf.trustDomain)
	}
	return nil
}
