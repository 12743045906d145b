package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// sdsRetry is the pause before an SDS stream is opened again after it
// failed.
const sdsRetry = time.Second

// ProviderOptions configure a Provider.
type ProviderOptions struct {
	// Dial connects to a bootstrap cluster by name (the SDS cluster, e.g.
	// Istio's "sds-grpc" pipe to the agent's workload socket).
	Dial func(ctx context.Context, cluster string) (net.Conn, error)
	// ADS says the proxy has an ADS stream (the bootstrap's ads_config)
	// whose client subscribes to the secrets whose sds_config is
	// {ads: {}} (ADSSecrets, ApplySecrets); without it such secrets are
	// refused.
	ADS bool
	// Node identifies the proxy on SDS requests.
	Node   *corev3.Node
	Logger *slog.Logger
}

// Provider owns the SDS subscriptions of one proxy: one stream per
// (cluster, secret name), opened when a TLS context first names the secret
// and kept until Close (a proxy names few secrets: Istio's "default" and
// "ROOTCA"). Safe for concurrent use.
type Provider struct {
	opts   ProviderOptions
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex // guards subs, ads and adsChanged
	subs map[sdsKey]*Secret
	// ads are the secrets taken from the ADS stream by name; adsChanged
	// is closed (and replaced) when one is added.
	ads        map[string]*Secret
	adsChanged chan struct{}
}

type sdsKey struct{ cluster, name string }

// NewProvider returns a Provider; Close ends its streams.
func NewProvider(o ProviderOptions) *Provider {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Provider{opts: o, log: log.With("component", "sds-client"), ctx: ctx, cancel: cancel, subs: map[sdsKey]*Secret{},
		ads: map[string]*Secret{}, adsChanged: make(chan struct{})}
}

// Close ends every SDS stream and waits for them.
func (p *Provider) Close() {
	p.cancel()
	p.wg.Wait()
}

// Secret is one secret's current value, swapped atomically on every SDS
// update. Handshakes read it; connections already established keep the
// certificate they were made with.
type Secret struct {
	name  string
	value atomic.Pointer[secretValue]
	ready chan struct{} // closed when the first value is stored
	once  sync.Once
}

type secretValue struct {
	version string
	cert    *tls.Certificate // a tls_certificate secret
	roots   *x509.CertPool   // a validation_context secret
	crls    crlSet           // its crl, nil when it has none
	// validation is the validation context as sent, for combining with a
	// default_validation_context.
	validation *tlsv3.CertificateValidationContext
}

func newSecret(name string) *Secret { return &Secret{name: name, ready: make(chan struct{})} }

func (s *Secret) store(v *secretValue) {
	s.value.Store(v)
	s.once.Do(func() { close(s.ready) })
}

// wait blocks until the secret has a value or ctx ends.
func (s *Secret) wait(ctx context.Context) error {
	select {
	case <-s.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("secret %q not received: %w", s.name, ctx.Err())
	}
}

// staticSecret wraps an inline or file value.
func staticSecret(name string, v *secretValue) *Secret {
	s := newSecret(name)
	s.store(v)
	return s
}

// sdsSecret validates an SdsSecretConfig and returns its subscription,
// starting the stream the first time the (cluster, name) pair is seen.
func (p *Provider) sdsSecret(cfg *tlsv3.SdsSecretConfig, path string) (*Secret, error) {
	if p == nil {
		return nil, fmt.Errorf("%s: SDS secrets are not available in this proxy", path)
	}
	if cfg.GetName() == "" {
		return nil, fmt.Errorf("%s.name is empty (name the secret, e.g. \"default\")", path)
	}
	if err := fieldaudit.Only(path, cfg.ProtoReflect(), sdsSecretConfigFields); err != nil {
		return nil, err
	}
	if cfg.GetSdsConfig().GetAds() != nil {
		return p.adsSecret(cfg, path)
	}
	cluster, err := sdsCluster(cfg.GetSdsConfig(), path+".sds_config")
	if err != nil {
		return nil, err
	}
	key := sdsKey{cluster, cfg.GetName()}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.subs[key]; s != nil {
		return s, nil
	}
	s := newSecret(cfg.GetName())
	p.subs[key] = s
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.watch(key, s)
	}()
	return s, nil
}

// adsSecret accepts an ADS config source, Istio's for a Gateway's
// credentialName (SDSAdsConfig): the secret comes on the ADS stream, as
// the Secret type, which the proxy's ADS client subscribes to by name
// (ADSSecrets) and hands to ApplySecrets.
func (p *Provider) adsSecret(cfg *tlsv3.SdsSecretConfig, path string) (*Secret, error) {
	if err := fieldaudit.Only(path+".sds_config", cfg.GetSdsConfig().ProtoReflect(), adsConfigSourceFields); err != nil {
		return nil, err
	}
	if !p.opts.ADS {
		return nil, fmt.Errorf("%s.sds_config.ads: this proxy has no ADS stream (the bootstrap's dynamic_resources.ads_config)", path)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.ads[cfg.GetName()]; s != nil {
		return s, nil
	}
	s := newSecret(cfg.GetName())
	p.ads[cfg.GetName()] = s
	close(p.adsChanged)
	p.adsChanged = make(chan struct{})
	return s, nil
}

// ADSSecrets returns the names of the secrets taken from the ADS stream,
// sorted, and a channel closed when one is added. It implements
// xdsclient.SecretSubscriptions.
func (p *Provider) ADSSecrets() ([]string, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.ads)), p.adsChanged
}

// ApplySecrets stores the secrets of one ADS response. A secret that does
// not parse rejects the whole response, leaving every secret as it was;
// one that no TLS context names is ignored. It implements
// xdsclient.SecretSubscriptions.
func (p *Provider) ApplySecrets(version string, secrets []*tlsv3.Secret) error {
	values := make([]*secretValue, len(secrets))
	for i, sec := range secrets {
		v, err := parseSecret(sec)
		if err != nil {
			return err
		}
		v.version = version
		values[i] = v
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, sec := range secrets {
		if s := p.ads[sec.GetName()]; s != nil {
			s.store(values[i])
		}
	}
	return nil
}

// sdsCluster accepts the config source Istio's bootstrap and generated
// TLS contexts use: an api_config_source of type GRPC with one envoy_grpc
// service naming a bootstrap cluster.
func sdsCluster(cs *corev3.ConfigSource, path string) (string, error) {
	if cs == nil {
		return "", fmt.Errorf("%s is missing (an api_config_source with an envoy_grpc cluster, e.g. sds-grpc)", path)
	}
	if err := fieldaudit.Only(path, cs.ProtoReflect(), sdsConfigSourceFields); err != nil {
		return "", err
	}
	src := cs.GetApiConfigSource()
	if src == nil {
		return "", fmt.Errorf("%s: only api_config_source is supported", path)
	}
	if err := fieldaudit.Only(path+".api_config_source", src.ProtoReflect(), apiConfigSourceFields); err != nil {
		return "", err
	}
	if src.GetApiType() != corev3.ApiConfigSource_GRPC {
		return "", fmt.Errorf("%s.api_config_source.api_type %s is not supported (want GRPC)", path, src.GetApiType())
	}
	gs := src.GetGrpcServices()
	if len(gs) != 1 || gs[0].GetEnvoyGrpc().GetClusterName() == "" {
		return "", fmt.Errorf("%s.api_config_source.grpc_services: want exactly one envoy_grpc with a cluster_name", path)
	}
	if err := fieldaudit.Only(path+".api_config_source.grpc_services[0]", gs[0].ProtoReflect(), grpcServiceFields); err != nil {
		return "", err
	}
	if err := fieldaudit.Only(path+".api_config_source.grpc_services[0].envoy_grpc", gs[0].GetEnvoyGrpc().ProtoReflect(), envoyGrpcFields); err != nil {
		return "", err
	}
	return gs[0].GetEnvoyGrpc().GetClusterName(), nil
}

// watch keeps one SDS stream for key open until the provider closes.
func (p *Provider) watch(key sdsKey, s *Secret) {
	log := p.log.With("cluster", key.cluster, "secret", key.name)
	for p.ctx.Err() == nil {
		err := p.stream(key, s)
		if p.ctx.Err() != nil {
			return
		}
		log.Warn("sds stream ended; retrying", "error", err)
		select {
		case <-p.ctx.Done():
			return
		case <-time.After(sdsRetry):
		}
	}
}

func (p *Provider) stream(key sdsKey, s *Secret) error {
	if p.opts.Dial == nil {
		return errors.New("no dialer for SDS clusters")
	}
	cc, err := grpc.NewClient("passthrough:///"+key.cluster,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return p.opts.Dial(ctx, key.cluster) }))
	if err != nil {
		return fmt.Errorf("sds cluster %s: %w", key.cluster, err)
	}
	defer cc.Close()
	st, err := secretv3.NewSecretDiscoveryServiceClient(cc).StreamSecrets(p.ctx)
	if err != nil {
		return fmt.Errorf("sds cluster %s: open stream: %w", key.cluster, err)
	}
	req := &discovery.DiscoveryRequest{Node: p.opts.Node, TypeUrl: xdsapi.SecretType, ResourceNames: []string{key.name}}
	if err := st.Send(req); err != nil {
		return err
	}
	version := ""
	for {
		resp, err := st.Recv()
		if err != nil {
			return err
		}
		ack := &discovery.DiscoveryRequest{TypeUrl: xdsapi.SecretType, ResourceNames: []string{key.name}, ResponseNonce: resp.GetNonce(), VersionInfo: version}
		v, err := decodeSecret(resp, key.name)
		if err != nil {
			p.log.Warn("sds update rejected", "cluster", key.cluster, "secret", key.name, "version", resp.GetVersionInfo(), "error", err)
			ack.ErrorDetail = &status.Status{Code: 3, Message: err.Error()}
		} else if v != nil {
			v.version = resp.GetVersionInfo()
			s.store(v)
			version = resp.GetVersionInfo()
			ack.VersionInfo = version
			p.log.Debug("sds secret updated", "cluster", key.cluster, "secret", key.name, "version", version)
		}
		if err := st.Send(ack); err != nil {
			return err
		}
	}
}

// decodeSecret finds name in resp and parses it; nil when resp does not
// carry it.
func decodeSecret(resp *discovery.DiscoveryResponse, name string) (*secretValue, error) {
	if resp.GetTypeUrl() != xdsapi.SecretType {
		return nil, fmt.Errorf("type_url %q, want %s", resp.GetTypeUrl(), xdsapi.SecretType)
	}
	for _, a := range resp.GetResources() {
		var sec tlsv3.Secret
		if err := a.UnmarshalTo(&sec); err != nil {
			return nil, fmt.Errorf("decode secret: %w", err)
		}
		if sec.GetName() != name {
			continue
		}
		return parseSecret(&sec)
	}
	return nil, nil
}

// parseSecret turns a Secret into a certificate or a trust bundle.
func parseSecret(sec *tlsv3.Secret) (*secretValue, error) {
	path := fmt.Sprintf("secret %q", sec.GetName())
	switch {
	case sec.GetTlsCertificate() != nil:
		c, err := parseCertificate(sec.GetTlsCertificate(), path+".tls_certificate")
		if err != nil {
			return nil, err
		}
		return &secretValue{cert: c}, nil
	case sec.GetValidationContext() != nil:
		vc := sec.GetValidationContext()
		roots, err := parseRoots(vc, path+".validation_context")
		if err != nil {
			return nil, err
		}
		crls, err := parseCRLs(vc, path+".validation_context")
		if err != nil {
			return nil, err
		}
		if crls != nil && roots == nil {
			return nil, fmt.Errorf("%s.validation_context.crl needs a trust bundle (trusted_ca) to check certificates against", path)
		}
		return &secretValue{roots: roots, crls: crls, validation: vc}, nil
	default:
		return nil, fmt.Errorf("%s: only tls_certificate and validation_context secrets are supported", path)
	}
}

func parseCertificate(tc *tlsv3.TlsCertificate, path string) (*tls.Certificate, error) {
	if err := fieldaudit.Only(path, tc.ProtoReflect(), tlsCertificateFields); err != nil {
		return nil, err
	}
	chain, err := dataSource(tc.GetCertificateChain(), path+".certificate_chain")
	if err != nil {
		return nil, err
	}
	key, err := dataSource(tc.GetPrivateKey(), path+".private_key")
	if err != nil {
		return nil, err
	}
	c, err := tls.X509KeyPair(chain, key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

func parseRoots(vc *tlsv3.CertificateValidationContext, path string) (*x509.CertPool, error) {
	if err := checkValidation(vc, path); err != nil {
		return nil, err
	}
	return trustedCA(vc, path)
}

// trustedCA is the trust bundle of vc (nil when it has none).
func trustedCA(vc *tlsv3.CertificateValidationContext, path string) (*x509.CertPool, error) {
	if vc.GetTrustedCa() == nil {
		return nil, nil
	}
	pem, err := dataSource(vc.GetTrustedCa(), path+".trusted_ca")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s.trusted_ca holds no PEM certificate", path)
	}
	return pool, nil
}

// checkValidation refuses validation features this socket does not
// implement, in a validation context of the TLS context or of an SDS
// secret (both may carry revocation lists: crl).
func checkValidation(vc *tlsv3.CertificateValidationContext, path string) error {
	return fieldaudit.Check(path, vc.ProtoReflect(), validationHonoured, validationRefused)
}

// dataSource reads an inline or file data source.
func dataSource(ds *corev3.DataSource, path string) ([]byte, error) {
	switch {
	case ds == nil:
		return nil, fmt.Errorf("%s is missing", path)
	case ds.GetInlineBytes() != nil:
		return ds.GetInlineBytes(), nil
	case ds.GetInlineString() != "":
		return []byte(ds.GetInlineString()), nil
	case ds.GetFilename() != "":
		if ds.GetWatchedDirectory() != nil {
			return nil, fmt.Errorf("%s.watched_directory is not supported (remove it)", path)
		}
		b, err := os.ReadFile(ds.GetFilename())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("%s: only inline_bytes, inline_string and filename are supported", path)
	}
}
