package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	"github.com/straitmesh/strait/internal/agent/caclient"
	"github.com/straitmesh/strait/internal/agent/sds"
	"github.com/straitmesh/strait/internal/agent/settings"
	"github.com/straitmesh/strait/internal/ca"
	"github.com/straitmesh/strait/internal/lifecycle"
)

// newSecretStore is the store of the workload's certificates, or nil when
// certificates are off (the CA address is plaintext).
func newSecretStore(cfg *settings.Config) *sds.Store {
	if !cfg.Identity.CertificatesEnabled() {
		return nil
	}
	return sds.NewStore()
}

// bundleRoots returns the trust bundle of the latest certificate in store
// (none when store is nil or empty): the agent's TLS connections trust it
// besides the root file, so a mesh root rotation reaches them.
func bundleRoots(store *sds.Store) func() []*x509.Certificate {
	if store == nil {
		return nil
	}
	return func() []*x509.Certificate {
		cur, _ := store.Current()
		if cur == nil {
			return nil
		}
		return cur.Roots
	}
}

// currentCertificate is the workload certificate and key in store while
// it is valid, else nil.
func currentCertificate(store *sds.Store) *tls.Certificate {
	cur, _ := store.Current()
	if cur == nil || !time.Now().Before(cur.Leaf.NotAfter) {
		return nil
	}
	c, err := tls.X509KeyPair(cur.CertChainPEM, cur.KeyPEM)
	if err != nil {
		return nil
	}
	return &c
}

// xdsDialOptions are the upstream xDS connection's credentials: TLS
// trusting the mesh root when the configuration says so (see
// settings.Identity), else the relay's plaintext default.
func xdsDialOptions(cfg *settings.Config, store *sds.Store) ([]grpc.DialOption, error) {
	if cfg.Identity.XDSRootCert == "" {
		return nil, nil
	}
	creds, err := caclient.TransportCredentials(caclient.TLSOptions{Addr: cfg.Proxy.GetDiscoveryAddress(), RootPath: cfg.Identity.XDSRootCert,
		ServerName: cfg.Identity.ServerName, ExtraRoots: bundleRoots(store)})
	if err != nil {
		return nil, fmt.Errorf("discoveryAddress %s (TLS): %w", cfg.Proxy.GetDiscoveryAddress(), err)
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithPerRPCCredentials(caclient.TokenCredentials{Path: cfg.Identity.TokenPath})}, nil
}

// startIdentity starts the certificate rotation into store and the SDS
// server on the workload socket, as parts of serving. store is nil when
// certificates are off (the CA address is plaintext: straitd serves its CA
// only over TLS); SDS then serves only the file-backed secrets a
// DestinationRule's tls names (file-cert:, file-root:).
func startIdentity(cfg *settings.Config, store *sds.Store, logger *slog.Logger, serving *lifecycle.Group) error {
	id := cfg.Identity
	log := logger.With("component", "agent")
	if store == nil {
		log.Info("no workload certificate: the CA address is plaintext (straitd serves its CA on TLS 15012); SDS serves file-backed secrets only",
			"ca_addr", id.CAAddress)
		return serveSDS(id, store, logger, serving)
	}
	if cfg.ServiceAccount == "" {
		return errors.New(settings.EnvServiceAccount + ": not set; the workload certificate's SPIFFE ID needs the pod's service account (spec.serviceAccountName, from the downward API)")
	}
	spiffe := ca.Identity{TrustDomain: id.TrustDomain, Namespace: cfg.PodNamespace, ServiceAccount: cfg.ServiceAccount}
	if err := spiffe.Validate(); err != nil {
		return err
	}
	// The current certificate goes with every certificate request, on a
	// connection of its own: straitd's CA renews it on that credential, so
	// the token (short-lived in file mode) is needed for the first
	// certificate only, as Istio's CA accepts the client certificate.
	creds, err := caclient.TransportCredentials(caclient.TLSOptions{Addr: id.CAAddress, RootPath: id.CARootCert, ServerName: id.ServerName,
		ExtraRoots: bundleRoots(store), ClientCertificate: func() *tls.Certificate { return currentCertificate(store) }})
	if err != nil {
		return fmt.Errorf("%s %s: %w", settings.EnvCAAddr, id.CAAddress, err)
	}
	client, err := caclient.New(caclient.Options{Conn: caclient.PerCallConn{Target: id.CAAddress, Opts: []grpc.DialOption{grpc.WithTransportCredentials(creds)}},
		TokenPath: id.TokenPath, HasClientCertificate: func() bool { return currentCertificate(store) != nil }})
	if err != nil {
		return err
	}
	rotator, err := sds.NewRotator(sds.RotatorOptions{Signer: client, SPIFFEID: spiffe.String(), TTL: id.SecretTTL, Store: store, Logger: logger})
	if err != nil {
		return err
	}
	if err := serveSDS(id, store, logger, serving); err != nil {
		return err
	}
	serving.Go("certificate rotation", rotator.Run)
	log.Info("workload identity", "spiffe_id", spiffe.String(), "ca_addr", id.CAAddress, "sds_socket", id.WorkloadSocketPath, "ttl", id.SecretTTL)
	return nil
}

// serveSDS starts the SDS server on the workload socket as a part of
// serving.
func serveSDS(id settings.Identity, store *sds.Store, logger *slog.Logger, serving *lifecycle.Group) error {
	lis, err := sds.ListenUnix(id.WorkloadSocketPath)
	if err != nil {
		return err
	}
	srv := sds.NewServer(sds.ServerOptions{Store: store, CredentialsDir: id.CredentialsDir, Logger: logger})
	serving.Go("sds server", func(ctx context.Context) error {
		defer context.AfterFunc(ctx, srv.Stop)()
		return srv.Serve(lis)
	})
	return nil
}
