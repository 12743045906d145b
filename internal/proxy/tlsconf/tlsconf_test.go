package tlsconf

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/xdsapi"
)

// testCA issues SPIFFE certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
	n    atomic.Int64
}

func newCA(t testing.TB) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{Organization: []string{"test"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &testCA{cert: c, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a chain and key PEM for a SPIFFE ID.
func (ca *testCA) issue(t testing.TB, spiffe string) (chain, key []byte, serial int64) {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	u, _ := url.Parse(spiffe)
	serial = 100 + ca.n.Add(1)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		URIs: []*url.URL{u}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &k.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), serial
}

// fakeSDS serves "default" and "ROOTCA" over SotW SDS on a unix socket and
// pushes every Set to open streams, as strait-agent and Istio's agent do.
type fakeSDS struct {
	secretv3.UnimplementedSecretDiscoveryServiceServer
	mu      sync.Mutex
	chain   []byte
	key     []byte
	root    []byte
	version int
	changed chan struct{}
	acks    atomic.Int64
	nacks   atomic.Int64
	path    string
}

func startSDS(t testing.TB) *fakeSDS {
	t.Helper()
	f := &fakeSDS{changed: make(chan struct{}), path: filepath.Join(t.TempDir(), "socket")}
	lis, err := net.Listen("unix", f.path)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	secretv3.RegisterSecretDiscoveryServiceServer(s, f)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return f
}

func (f *fakeSDS) set(chain, key, root []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.chain, f.key, f.root = chain, key, root
	f.version++
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeSDS) StreamSecrets(st grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]) error {
	req, err := st.Recv()
	if err != nil {
		return err
	}
	go func() {
		for {
			r, err := st.Recv()
			if err != nil {
				return
			}
			if r.GetErrorDetail() != nil {
				f.nacks.Add(1)
			} else {
				f.acks.Add(1)
			}
		}
	}()
	sent := 0
	for {
		f.mu.Lock()
		v, changed := f.version, f.changed
		var sec *tlsv3.Secret
		name := req.GetResourceNames()[0]
		inline := func(b []byte) *corev3.DataSource {
			return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
		}
		if name == "ROOTCA" {
			sec = &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{TrustedCa: inline(f.root)}}}
		} else {
			sec = &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{CertificateChain: inline(f.chain), PrivateKey: inline(f.key)}}}
		}
		f.mu.Unlock()
		if v > sent {
			a, _ := anypb.New(sec)
			if err := st.Send(&discovery.DiscoveryResponse{VersionInfo: strconv.Itoa(v), TypeUrl: xdsapi.SecretType, Nonce: strconv.Itoa(v), Resources: []*anypb.Any{a}}); err != nil {
				return err
			}
			sent = v
		}
		select {
		case <-changed:
		case <-st.Context().Done():
			return nil
		}
	}
}

func sdsConfig(name string) *tlsv3.SdsSecretConfig {
	return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: &corev3.ConfigSource{
		ResourceApiVersion: corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_ApiConfigSource{ApiConfigSource: &corev3.ApiConfigSource{
			ApiType: corev3.ApiConfigSource_GRPC, TransportApiVersion: corev3.ApiVersion_V3,
			GrpcServices: []*corev3.GrpcService{{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "sds-grpc"}}}},
		}},
	}}
}

// istioCommon is the CommonTlsContext Istio generates for sidecar mTLS.
func istioCommon(alpn []string, sans ...string) *tlsv3.CommonTlsContext {
	var ms []*tlsv3.SubjectAltNameMatcher
	for _, s := range sans {
		ms = append(ms, &tlsv3.SubjectAltNameMatcher{SanType: tlsv3.SubjectAltNameMatcher_URI,
			Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}})
	}
	return &tlsv3.CommonTlsContext{
		TlsParams:                      &tlsv3.TlsParameters{TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2, TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3},
		AlpnProtocols:                  alpn,
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{sdsConfig("default")},
		ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
			DefaultValidationContext:         &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: ms},
			ValidationContextSdsSecretConfig: sdsConfig("ROOTCA"),
		}},
	}
}

func socket(t testing.TB, m proto.Message) *corev3.TransportSocket {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.TransportSocket{Name: SocketTLS, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}
}

func provider(t testing.TB, f *fakeSDS) *Provider {
	t.Helper()
	p := NewProvider(ProviderOptions{Dial: func(ctx context.Context, cluster string) (net.Conn, error) {
		if cluster != "sds-grpc" {
			t.Errorf("dialed cluster %q, want sds-grpc", cluster)
		}
		return (&net.Dialer{}).DialContext(ctx, "unix", f.path)
	}})
	t.Cleanup(p.Close)
	return p
}

const (
	serverID = "spiffe://cluster.local/ns/default/sa/server"
	clientID = "spiffe://cluster.local/ns/default/sa/client"
)

type pair struct {
	client *Client
	server *Server
	srvSDS *fakeSDS
	ca     *testCA
}

func newPair(t *testing.T, clientSANs []string, requireClient bool) *pair {
	t.Helper()
	ca := newCA(t)
	srvSDS, cliSDS := startSDS(t), startSDS(t)
	c, k, _ := ca.issue(t, serverID)
	srvSDS.set(c, k, ca.pem)
	c, k, _ = ca.issue(t, clientID)
	cliSDS.set(c, k, ca.pem)
	cl, err := NewClient(socket(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: istioCommon([]string{"istio-peer-exchange", "istio"}, clientSANs...)}), provider(t, cliSDS))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(socket(t, &tlsv3.DownstreamTlsContext{
		CommonTlsContext:         istioCommon([]string{"h2", "http/1.1", "istio-peer-exchange", "istio"}, clientID),
		RequireClientCertificate: wrapperspb.Bool(requireClient),
	}), provider(t, srvSDS))
	if err != nil {
		t.Fatal(err)
	}
	return &pair{client: cl, server: srv, srvSDS: srvSDS, ca: ca}
}

// dial handshakes both sides over loopback; the server side echoes.
func (p *pair) dial(t *testing.T) (*ClientConn, error, error) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srvErr := make(chan error, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		tc, err := p.server.Handshake(ctx, c)
		srvErr <- err
		if err == nil {
			go func() { _, _ = io.Copy(tc, tc); tc.Close() }()
		}
	}()
	raw, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tc, cerr := p.client.Handshake(ctx, raw)
	serr := <-srvErr
	if cerr != nil {
		return nil, cerr, serr
	}
	t.Cleanup(func() { tc.Close() })
	return tc, cerr, serr
}

func echo(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
		t.Fatalf("echo = %q, %v; want %q", buf, err, msg)
	}
}

func TestMutualTLSOverSDS(t *testing.T) {
	p := newPair(t, []string{serverID}, true)
	tc, cerr, serr := p.dial(t)
	if cerr != nil || serr != nil {
		t.Fatalf("handshake: client %v, server %v", cerr, serr)
	}
	st := tc.ConnectionState()
	if st.Version != tls.VersionTLS13 {
		t.Errorf("version %x, want TLS 1.3", st.Version)
	}
	if st.NegotiatedProtocol != "istio-peer-exchange" {
		t.Errorf("ALPN %q, want the server's first protocol the client offers, istio-peer-exchange", st.NegotiatedProtocol)
	}
	if got := st.PeerCertificates[0].URIs[0].String(); got != serverID {
		t.Errorf("server identity %s, want %s", got, serverID)
	}
	// What istio.stats labels a source reporter's requests with, read
	// through the wrappers an upstream connection has.
	if peer, local := UpstreamPrincipals(struct{ net.Conn }{tc}); peer != "" || local != "" {
		t.Errorf("principals through a wrapper without NetConn: %q %q, want none", peer, local)
	}
	if peer, local := UpstreamPrincipals(&netConnWrapper{tc}); peer != serverID || local != clientID {
		t.Errorf("upstream principals %q, %q; want %s, %s", peer, local, serverID, clientID)
	}
	echo(t, tc, "hello")
}

type netConnWrapper struct{ net.Conn }

func (w *netConnWrapper) NetConn() net.Conn { return w.Conn }

func TestRotationAppliesToNewHandshakesOnly(t *testing.T) {
	p := newPair(t, []string{serverID}, true)
	old, cerr, serr := p.dial(t)
	if cerr != nil || serr != nil {
		t.Fatalf("handshake: client %v, server %v", cerr, serr)
	}
	oldSerial := old.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	c, k, serial := p.ca.issue(t, serverID)
	p.srvSDS.set(c, k, p.ca.pem)
	deadline := time.Now().Add(10 * time.Second)
	for {
		tc, cerr, serr := p.dial(t)
		if cerr != nil || serr != nil {
			t.Fatalf("handshake after rotation: client %v, server %v", cerr, serr)
		}
		if tc.ConnectionState().PeerCertificates[0].SerialNumber.Int64() == serial {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("new handshakes still present serial %d, want the rotated %d", oldSerial, serial)
		}
		time.Sleep(20 * time.Millisecond)
	}
	echo(t, old, "still up") // the connection made before the rotation is not dropped
	if p.srvSDS.acks.Load() < 2 {
		t.Errorf("SDS ACKs = %d, want one per version (2)", p.srvSDS.acks.Load())
	}
}

func TestSANMismatchRefused(t *testing.T) {
	p := newPair(t, []string{"spiffe://cluster.local/ns/default/sa/other"}, true)
	_, cerr, _ := p.dial(t)
	if cerr == nil || !strings.Contains(cerr.Error(), "match none of the configured subject alt names") {
		t.Fatalf("client handshake error %v, want a SAN mismatch", cerr)
	}
}

func TestClientWithoutCertificate(t *testing.T) {
	for _, require := range []bool{true, false} {
		t.Run("require="+strconv.FormatBool(require), func(t *testing.T) {
			p := newPair(t, []string{serverID}, require)
			lis, _ := net.Listen("tcp", "127.0.0.1:0")
			defer lis.Close()
			srvErr := make(chan error, 1)
			go func() {
				c, err := lis.Accept()
				if err != nil {
					srvErr <- err
					return
				}
				tc, err := p.server.Handshake(context.Background(), c)
				if err == nil {
					// TLS 1.3 client certificates arrive after the client's
					// handshake ends: read to see the server's verdict.
					_, err = tc.Read(make([]byte, 1))
					if errors.Is(err, io.EOF) {
						err = nil
					}
					tc.Close()
				}
				srvErr <- err
			}()
			c, err := tls.Dial("tcp", lis.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"istio"}})
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			err = <-srvErr
			if require && (err == nil || !strings.Contains(err.Error(), "certificate")) {
				t.Errorf("server accepted a client without a certificate under require_client_certificate: %v", err)
			}
			if !require && err != nil {
				t.Errorf("server refused a client without a certificate when it is optional: %v", err)
			}
		})
	}
}

func TestRefusesByName(t *testing.T) {
	prov := NewProvider(ProviderOptions{})
	defer prov.Close()
	cases := []struct {
		name string
		up   *tlsv3.UpstreamTlsContext
		down *tlsv3.DownstreamTlsContext
		want string
	}{
		{"allow_renegotiation", &tlsv3.UpstreamTlsContext{AllowRenegotiation: true}, nil, "UpstreamTlsContext.allow_renegotiation"},
		{"key_log", &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{KeyLog: &tlsv3.TlsKeyLog{Path: "/tmp/k"}}}, nil, "common_tls_context.key_log"},
		{"bad crl", &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{
			ValidationContext: &tlsv3.CertificateValidationContext{Crl: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "x"}}}}}}, nil, "validation_context.crl: no PEM \"X509 CRL\" block and not a DER CRL"},
		{"spki pinning", &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{
			ValidationContext: &tlsv3.CertificateValidationContext{VerifyCertificateSpki: []string{"x"}}}}}, nil, "validation_context.verify_certificate_spki"},
		{"tls 1.0", &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{TlsParams: &tlsv3.TlsParameters{TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_0}}}, nil, "tls_minimum_protocol_version TLSv1_0"},
		{"cipher", &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{TlsParams: &tlsv3.TlsParameters{CipherSuites: []string{"RC4-SHA"}}}}, nil, `cipher_suites "RC4-SHA"`},
		{"sds ads", &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: "default",
			SdsConfig: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}}}}}, nil, "sds_config.ads"},
		{"san other_name", &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{
			ValidationContext: &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{{SanType: tlsv3.SubjectAltNameMatcher_OTHER_NAME,
				Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "x"}}}}}}}}, nil, "san_type OTHER_NAME"},
		{"session_ticket_keys", nil, &tlsv3.DownstreamTlsContext{CommonTlsContext: istioCommon(nil), SessionTicketKeysType: &tlsv3.DownstreamTlsContext_SessionTicketKeys{}}, "DownstreamTlsContext.session_ticket_keys"},
		{"server without certificate", nil, &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{}}, "a server needs a certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.up != nil {
				_, err = NewClient(socket(t, tc.up), prov)
			} else {
				_, err = NewServer(socket(t, tc.down), prov)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
	if _, err := NewClient(&corev3.TransportSocket{Name: "envoy.transport_sockets.alts"}, prov); err == nil || !strings.Contains(err.Error(), "alts") {
		t.Errorf("alts socket: error %v, want a refusal naming it", err)
	}
	if c, err := NewClient(&corev3.TransportSocket{Name: SocketRawBuffer}, prov); c != nil || err != nil {
		t.Errorf("raw_buffer: %v, %v; want plaintext", c, err)
	}
}
