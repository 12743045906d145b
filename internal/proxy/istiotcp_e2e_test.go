package proxy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/proxy/bootstrap"
)

// meshPKI writes a CA and one leaf per SPIFFE id to dir, returning the CA
// file and each leaf's cert and key files.
func meshPKI(t *testing.T, dir string, ids ...string) (caFile string, leaves [][2]string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mesh-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	write := func(name string, b *pem.Block) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile = write("ca.pem", &pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	for i, id := range ids {
		u, _ := url.Parse(id)
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), URIs: []*url.URL{u},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalECPrivateKey(key)
		leaves = append(leaves, [2]string{
			write(fmt.Sprintf("leaf%d.pem", i), &pem.Block{Type: "CERTIFICATE", Bytes: der}),
			write(fmt.Sprintf("leaf%d-key.pem", i), &pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		})
	}
	return caFile, leaves
}

func startStaticProxy(t *testing.T, yaml string) *Proxy {
	t.Helper()
	b, err := bootstrap.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{Bootstrap: b, Logger: testLogger(t), AdminAddress: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func promText(t *testing.T, p *Proxy) string {
	var b strings.Builder
	if err := p.Stats.WritePrometheus(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A TCP connection from a client sidecar (productpage, outbound listener
// with istio.stats, a cluster with mTLS, ALPN istio-peer-exchange and the
// istio.metadata_exchange upstream filter) to a server sidecar (ratings,
// inbound chain terminating mTLS with the exchange's ALPN, then
// istio.metadata_exchange, istio.stats and tcp_proxy) and its app: the
// exchange frames never reach the app or the client, and both reporters
// count the connection and its bytes with the other side's workload and
// the certificates' identities, as Istio's TCP metadata exchange test
// expects. Real sockets on loopback, real TLS.
func TestIstioTCPMetadataExchange(t *testing.T) {
	dir := t.TempDir()
	caFile, leaves := meshPKI(t, dir, "spiffe://cluster.local/ns/default/sa/productpage", "spiffe://cluster.local/ns/default/sa/ratings")

	// The app: echoes what it gets, with a prefix, and records all of it.
	app, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	appGot := make(chan string, 1)
	go func() {
		c, err := app.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err != nil {
			appGot <- "error: " + err.Error()
			return
		}
		appGot <- string(buf)
		_, _ = c.Write(append([]byte("echo:"), buf...)) // a failed write shows as the client's short read
	}()
	appHost, appPort, _ := net.SplitHostPort(app.Addr().String())

	serverAddr, clientAddr := freeAddr(t), freeAddr(t)
	sHost, sPort, _ := net.SplitHostPort(serverAddr)
	cHost, cPort, _ := net.SplitHostPort(clientAddr)
	mx := `{name: istio.metadata_exchange, typed_config: {"@type": type.googleapis.com/udpa.type.v1.TypedStruct, type_url: type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange, value: {protocol: istio-peer-exchange, enable_discovery: true}}}`
	statsFilter := func(inbound bool) string {
		return fmt.Sprintf(`{name: istio.stats, typed_config: {"@type": type.googleapis.com/stats.PluginConfig, disable_host_header_fallback: %v}}`, inbound)
	}
	tlsCommon := func(leaf [2]string) string {
		return fmt.Sprintf(`{alpn_protocols: [istio-peer-exchange, istio], tls_certificates: [{certificate_chain: {filename: %s}, private_key: {filename: %s}}], validation_context: {trusted_ca: {filename: %s}}}`, leaf[0], leaf[1], caFile)
	}

	server := startStaticProxy(t, fmt.Sprintf(`
node:
  id: sidecar~127.0.0.2~ratings-v1-1.default~default.svc.cluster.local
  metadata: {NAMESPACE: default, NAME: ratings-v1-1, WORKLOAD_NAME: ratings-v1, CLUSTER_ID: server-cluster,
    OWNER: "kubernetes://apis/apps/v1/namespaces/default/deployments/ratings-v1",
    LABELS: {app: ratings, version: v1, service.istio.io/canonical-name: ratings, service.istio.io/canonical-revision: version-1}}
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  clusters:
  - name: "inbound|9000||"
    type: STATIC
    connect_timeout: 2s
    load_assignment: {cluster_name: app, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: %s, port_value: %s}}}}]}]}
  listeners:
  - name: virtualInbound
    traffic_direction: INBOUND
    address: {socket_address: {address: %s, port_value: %s}}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          require_client_certificate: true
          common_tls_context: %s
      filters:
      - %s
      - %s
      - {name: envoy.filters.network.tcp_proxy, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: "inbound|9000||", cluster: "inbound|9000||"}}
`, appHost, appPort, sHost, sPort, tlsCommon(leaves[1]), mx, statsFilter(true)))

	client := startStaticProxy(t, fmt.Sprintf(`
node:
  id: sidecar~127.0.0.1~productpage-v1-1.default~default.svc.cluster.local
  metadata: {NAMESPACE: default, NAME: productpage-v1-1, WORKLOAD_NAME: productpage-v1, CLUSTER_ID: client-cluster,
    LABELS: {app: productpage, version: v1, service.istio.io/canonical-name: productpage-v1, service.istio.io/canonical-revision: version-1}}
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  clusters:
  - name: "outbound|9000||ratings.default.svc.cluster.local"
    type: STATIC
    connect_timeout: 2s
    load_assignment: {cluster_name: ratings, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: %s, port_value: %s}}}}]}]}
    filters: [%s]
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: "outbound_.9000_._.ratings.default.svc.cluster.local"
        common_tls_context: %s
  listeners:
  - name: ratings_9000
    traffic_direction: OUTBOUND
    address: {socket_address: {address: %s, port_value: %s}}
    filter_chains:
    - filters:
      - %s
      - {name: envoy.filters.network.tcp_proxy, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: "outbound|9000||ratings.default.svc.cluster.local", cluster: "outbound|9000||ratings.default.svc.cluster.local"}}
`, sHost, sPort, mx, tlsCommon(leaves[0]), cHost, cPort, statsFilter(false)))

	var c net.Conn
	waitFor(t, 10*time.Second, "the client listener", func() bool {
		var err error
		c, err = net.DialTimeout("tcp", clientAddr, time.Second)
		return err == nil
	})
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	reply := make([]byte, len("echo:hello"))
	if _, err := io.ReadFull(c, reply); err != nil {
		t.Fatal(err)
	}
	if string(reply) != "echo:hello" {
		t.Errorf("client got %q: the server's exchange frame leaked", reply)
	}
	if got := <-appGot; got != "hello" {
		t.Errorf("app got %q: the client's exchange frame leaked", got)
	}
	c.Close()

	peers := `source_workload="productpage-v1",source_canonical_service="productpage-v1",source_canonical_revision="version-1",source_workload_namespace="default",source_principal="%s",source_app="productpage",source_version="v1",source_cluster="client-cluster",destination_workload="ratings-v1",destination_workload_namespace="default",destination_principal="%s",destination_app="ratings",destination_version="v1",destination_service="%s",destination_canonical_service="ratings",destination_canonical_revision="version-1",destination_service_name="%s",destination_service_namespace="%s",destination_cluster="server-cluster",request_protocol="tcp",response_flags="-",connection_security_policy="%s"`
	serverLabels := `reporter="destination",` + fmt.Sprintf(peers, "spiffe://cluster.local/ns/default/sa/productpage", "spiffe://cluster.local/ns/default/sa/ratings", "unknown", "unknown", "unknown", "mutual_tls")
	// The client's sidecar knows both identities from its upstream mTLS
	// connection: its own certificate's and the server's.
	clientLabels := `reporter="source",` + fmt.Sprintf(peers, "spiffe://cluster.local/ns/default/sa/productpage", "spiffe://cluster.local/ns/default/sa/ratings", "ratings.default.svc.cluster.local", "ratings", "default", "unknown")
	for _, tc := range []struct {
		who    string
		p      *Proxy
		labels string
	}{{"server", server, serverLabels}, {"client", client, clientLabels}} {
		want := []string{
			"istio_tcp_connections_opened_total{" + tc.labels + "} 1",
			"istio_tcp_connections_closed_total{" + tc.labels + "} 1",
			"istio_tcp_received_bytes_total{" + tc.labels + "} 5",
			"istio_tcp_sent_bytes_total{" + tc.labels + "} 10",
		}
		waitFor(t, 10*time.Second, tc.who+"'s istio_tcp metrics", func() bool {
			out := promText(t, tc.p)
			for _, w := range want {
				if !strings.Contains(out, w+"\n") {
					return false
				}
			}
			return true
		})
	}
	if t.Failed() {
		t.Logf("server:\n%s\nclient:\n%s", grepIstio(promText(t, server)), grepIstio(promText(t, client)))
	}
}

func grepIstio(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "istio_") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
