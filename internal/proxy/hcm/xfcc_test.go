package hcm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// xfccCerts is a CA, a server certificate and a client certificate.
type xfccCerts struct {
	caPEM            []byte
	server, client   tls.Certificate
	serverX, clientX *x509.Certificate
	ca               *x509.Certificate
}

// newXFCCCerts issues the server certificate with serverURI as its URI
// SAN, and the client's from tmpl.
func newXFCCCerts(t *testing.T, serverURI string, client *x509.Certificate) *xfccCerts {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, Subject: pkix.Name{CommonName: "xfcc ca"}}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, tmpl *x509.Certificate) (tls.Certificate, *x509.Certificate) {
		k := key()
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		x, _ := x509.ParseCertificate(der)
		return tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: k}, x
	}
	su, err := url.Parse(serverURI)
	if err != nil {
		t.Fatal(err)
	}
	out := &xfccCerts{ca: ca, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	out.server, out.serverX = leaf(2, &x509.Certificate{URIs: []*url.URL{su}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	out.client, out.clientX = leaf(3, client)
	return out
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// xfccBackend answers with the x-forwarded-client-cert it received (its
// lines joined with "|") in X-Seen-Xfcc, and X-Had-Xfcc: yes when there
// was one.
func xfccBackend(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vv, ok := r.Header["X-Forwarded-Client-Cert"]
		if ok {
			w.Header().Set("X-Had-Xfcc", "yes")
		}
		w.Header().Set("X-Seen-Xfcc", strings.Join(vv, "|"))
	}))
	t.Cleanup(s.Close)
	return s
}

// startXFCCProxy runs an HCM behind the proxy's own downstream TLS
// (tlsconf.Server, as a listener's filter chain terminates it) that sends
// everything to cluster be, with mod applied; it returns the address.
func startXFCCProxy(t *testing.T, codec Codec, certs *xfccCerts, mod func(*hcmv3.HttpConnectionManager), be *clusterv3.Cluster) string {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	cm := cluster.NewManager(log, stats.New())
	if err := cm.AddStatic([]*clusterv3.Cluster{be}); err != nil {
		t.Fatal(err)
	}
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: "test",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{prefixRoute("/", "be")}}}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: routerFilter}},
	}
	mod(h)
	f, err := Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	chain := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certs.server.Certificate[0]})
	keyDER, err := x509.MarshalPKCS8PrivateKey(certs.server.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	key := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	inline := func(b []byte) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
	}
	dtc, err := anypb.New(&tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificates: []*tlsv3.TlsCertificate{{CertificateChain: inline(chain), PrivateKey: inline(key)}},
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: inline(certs.caPEM)}},
		AlpnProtocols: []string{"h2", "http/1.1"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := tlsconf.NewServer(&corev3.TransportSocket{Name: tlsconf.SocketTLS, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: dtc}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Options{Logger: log, Clusters: cm, Codec: codec})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				tc, err := ts.Handshake(t.Context(), c)
				if err != nil {
					return
				}
				s.ServeConn(tc, f, netip.MustParseAddrPort(ln.Addr().String()), cluster.OriginalSource{})
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.Close() })
	return ln.Addr().String()
}

// TestXFCCOverMutualTLS: through the proxy's own TLS, both codecs and both
// downstream protocols: with Istio's inbound settings (APPEND_FORWARD,
// subject, uri and dns) the upstream sees the client's header with this
// hop's element appended, By the proxy's URI SAN and Hash the client
// certificate's digest; by default (SANITIZE) the client's header is
// removed; without a client certificate it is removed even with
// APPEND_FORWARD.
func TestXFCCOverMutualTLS(t *testing.T) {
	const serverID, clientID = "spiffe://cluster.local/ns/default/sa/server", "spiffe://cluster.local/ns/default/sa/client"
	certs := newXFCCCerts(t, serverID, &x509.Certificate{URIs: []*url.URL{mustURL(t, clientID)}})
	sum := sha256.Sum256(certs.clientX.Raw)
	element := "By=" + serverID + ";Hash=" + hex.EncodeToString(sum[:]) + `;Subject="";URI=` + clientID
	be := xfccBackend(t)
	beCluster := staticCluster("be", be.Listener.Addr().String())
	istio := func(h *hcmv3.HttpConnectionManager) {
		h.ForwardClientCertDetails = hcmv3.HttpConnectionManager_APPEND_FORWARD
		h.SetCurrentClientCertDetails = &hcmv3.HttpConnectionManager_SetCurrentClientCertDetails{Subject: wrapperspb.Bool(true), Uri: true, Dns: true}
	}
	pool := x509.NewCertPool()
	pool.AddCert(certs.ca)
	withCert := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{certs.client}}
	noCert := &tls.Config{RootCAs: pool}
	const sent = "By=spiffe://upstream;Hash=00"
	for _, codec := range codecs {
		appendAddr := startXFCCProxy(t, codec, certs, istio, beCluster)
		defaultAddr := startXFCCProxy(t, codec, certs, func(*hcmv3.HttpConnectionManager) {}, beCluster)
		for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
			t.Run(fmt.Sprintf("%s/%s", codec, proto), func(t *testing.T) {
				get := func(cfg *tls.Config, addr, xfcc string) (seen string, had bool) {
					t.Helper()
					req, _ := http.NewRequest("GET", "https://"+addr+"/", nil)
					if xfcc != "" {
						req.Header.Set("X-Forwarded-Client-Cert", xfcc)
					}
					resp, err := schemeClient(t, proto, cfg, addr).Do(req)
					if err != nil {
						t.Fatalf("GET: %v", err)
					}
					_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
					resp.Body.Close()
					if resp.StatusCode != 200 {
						t.Fatalf("GET: status %d", resp.StatusCode)
					}
					return resp.Header.Get("X-Seen-Xfcc"), resp.Header.Get("X-Had-Xfcc") == "yes"
				}
				if got, _ := get(withCert, appendAddr, ""); got != element {
					t.Errorf("APPEND_FORWARD, no client header: upstream saw %q, want %q", got, element)
				}
				if got, _ := get(withCert, appendAddr, sent); got != sent+","+element {
					t.Errorf("APPEND_FORWARD: upstream saw %q, want %q", got, sent+","+element)
				}
				if got, had := get(noCert, appendAddr, sent); had {
					t.Errorf("APPEND_FORWARD without a client certificate: upstream saw %q, want no header", got)
				}
				if got, had := get(withCert, defaultAddr, sent); had {
					t.Errorf("SANITIZE: upstream saw %q, want no header", got)
				}
			})
		}
	}
}
