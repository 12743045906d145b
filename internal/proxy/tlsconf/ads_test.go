package tlsconf

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	xdscore "github.com/cncf/xds/go/xds/core/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// fakeADS serves fakeSDS's secrets on the aggregated discovery service,
// as straitd serves a Gateway's credentials, counting the streams.
type fakeADS struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer
	sds     *fakeSDS
	streams atomic.Int64
}

func (f *fakeADS) StreamAggregatedResources(st grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]) error {
	f.streams.Add(1)
	return f.sds.StreamSecrets(st)
}

func startADS(t *testing.T) *fakeADS {
	t.Helper()
	f := &fakeADS{sds: &fakeSDS{changed: make(chan struct{}), path: filepath.Join(t.TempDir(), "socket")}}
	lis, err := net.Listen("unix", f.sds.path)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	discovery.RegisterAggregatedDiscoveryServiceServer(s, f)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return f
}

func adsConfig(name string) *tlsv3.SdsSecretConfig {
	return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		ResourceApiVersion:    corev3.ApiVersion_V3,
	}}
}

// TestGatewayCredentialOverADS: a server TLS context as straitd
// generates it for a MUTUAL Gateway server with a credentialName in
// Kubernetes mode (Istio's SDSAdsConfig: kubernetes://NAME and
// kubernetes://NAME-cacert with sds_config {ads: {}}) gets both secrets
// from the ADS cluster, on the aggregated discovery service, and serves
// a client whose certificate the CA secret verifies.
func TestGatewayCredentialOverADS(t *testing.T) {
	ca := newCA(t)
	ads := startADS(t)
	c, k, _ := ca.issue(t, serverID)
	ads.sds.set(c, k, ca.pem)
	var dialed atomic.Value
	prov := NewProvider(ProviderOptions{ADSCluster: "xds-grpc", Dial: func(ctx context.Context, cluster string) (net.Conn, error) {
		dialed.Store(cluster)
		return (&net.Dialer{}).DialContext(ctx, "unix", ads.sds.path)
	}})
	t.Cleanup(prov.Close)
	srv, err := NewServer(socket(t, &tlsv3.DownstreamTlsContext{
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{adsConfig("kubernetes://cred")},
			ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         &tlsv3.CertificateValidationContext{},
				ValidationContextSdsSecretConfig: adsConfig("ROOTCA"), // fakeSDS's CA secret
			}},
		},
		RequireClientCertificate: wrapperspb.Bool(true),
	}), prov)
	if err != nil {
		t.Fatal(err)
	}
	cliSDS := startSDS(t)
	c, k, _ = ca.issue(t, clientID)
	cliSDS.set(c, k, ca.pem)
	cl, err := NewClient(socket(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: istioCommon(nil, serverID)}), provider(t, cliSDS))
	if err != nil {
		t.Fatal(err)
	}
	p := &pair{client: cl, server: srv}
	tc, cerr, serr := p.dial(t)
	if cerr != nil || serr != nil {
		t.Fatalf("handshake: client %v, server %v", cerr, serr)
	}
	echo(t, tc, "over ads")
	if got := dialed.Load(); got != "xds-grpc" {
		t.Errorf("dialed %v, want the ADS cluster xds-grpc", got)
	}
	if n := ads.streams.Load(); n != 2 {
		t.Errorf("%d ADS streams, want one per secret (2)", n)
	}
}

// TestADSSecretRefused: without an ADS cluster an ADS-sourced secret is
// refused naming the field; an ADS config source with a field this proxy
// does not implement too.
func TestADSSecretRefused(t *testing.T) {
	prov := NewProvider(ProviderOptions{})
	defer prov.Close()
	ctx := &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{adsConfig("kubernetes://cred")}}}
	if _, err := NewServer(socket(t, ctx), prov); err == nil || !strings.Contains(err.Error(), "sds_config.ads: this proxy has no ADS cluster") {
		t.Errorf("no ADS cluster: %v", err)
	}
	prov2 := NewProvider(ProviderOptions{ADSCluster: "xds-grpc"})
	defer prov2.Close()
	cfg := adsConfig("kubernetes://cred")
	cfg.SdsConfig.ConfigSourceSpecifier = &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}
	cfg.SdsConfig.Authorities = []*xdscore.Authority{{Name: "x"}}
	ctx.CommonTlsContext.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{cfg}
	if _, err := NewServer(socket(t, ctx), prov2); err == nil || !strings.Contains(err.Error(), "authorities") {
		t.Errorf("authorities: %v", err)
	}
}
