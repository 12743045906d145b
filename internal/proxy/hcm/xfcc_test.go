package hcm

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/certtest"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

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
func startXFCCProxy(t *testing.T, codec Codec, certs *certtest.Certs, mod func(*hcmv3.HttpConnectionManager), be *clusterv3.Cluster) string {
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
	chain := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certs.Server.Certificate[0]})
	keyDER, err := x509.MarshalPKCS8PrivateKey(certs.Server.PrivateKey)
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
			TrustedCa: inline(certs.CAPEM)}},
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
	certs := certtest.Issue(t, serverID, &x509.Certificate{URIs: []*url.URL{certtest.MustURL(t, clientID)}})
	sum := sha256.Sum256(certs.ClientX.Raw)
	element := "By=" + serverID + ";Hash=" + hex.EncodeToString(sum[:]) + `;Subject="";URI=` + clientID
	be := xfccBackend(t)
	beCluster := staticCluster("be", be.Listener.Addr().String())
	istio := func(h *hcmv3.HttpConnectionManager) {
		h.ForwardClientCertDetails = hcmv3.HttpConnectionManager_APPEND_FORWARD
		h.SetCurrentClientCertDetails = &hcmv3.HttpConnectionManager_SetCurrentClientCertDetails{Subject: wrapperspb.Bool(true), Uri: true, Dns: true}
	}
	pool := x509.NewCertPool()
	pool.AddCert(certs.CA)
	withCert := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{certs.Client}}
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
