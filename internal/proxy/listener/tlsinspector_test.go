package listener

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"math/big"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// testCert is a self-signed certificate for names.
func testCert(t *testing.T, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tcpPair is a connected loopback pair.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestInspectTLS reads a real ClientHello's SNI, then lets the handshake
// finish on the replayed connection: the inspector consumed nothing.
func TestInspectTLS(t *testing.T) {
	client, server := tcpPair(t)
	cert := testCert(t, "b.example.com")
	done := make(chan error, 1)
	go func() {
		tc := tls.Client(client, &tls.Config{ServerName: "b.example.com", InsecureSkipVerify: true}) //nolint:gosec // test peer
		if err := tc.Handshake(); err != nil {
			done <- err
			return
		}
		_, err := tc.Write([]byte("ping"))
		done <- err
	}()
	c, in, ok := inspectTLS(server, 5*time.Second, false)
	if !ok || in.sni != "b.example.com" || in.transport != transportTLS {
		t.Fatalf("inspection = %+v, %v; want SNI b.example.com, tls", in, ok)
	}
	ts := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
	buf := make([]byte, 4)
	if _, err := io.ReadFull(ts, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("TLS through the replayed connection: %q, %v", buf, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestInspectPlainText(t *testing.T) {
	client, server := tcpPair(t)
	_, _ = client.Write([]byte("hello"))
	c, in, ok := inspectTLS(server, 5*time.Second, false)
	if !ok || in.sni != "" || in.transport != transportRaw {
		t.Fatalf("inspection = %+v, %v; want raw_buffer", in, ok)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("replayed %q, %v", buf, err)
	}
}

func TestInspectTimeout(t *testing.T) {
	for _, cont := range []bool{false, true} {
		client, server := tcpPair(t)
		_, _ = client.Write([]byte{0x16, 0x03}) // a handshake record that never completes
		_, in, ok := inspectTLS(server, 50*time.Millisecond, cont)
		if ok != cont || in.transport != transportRaw {
			t.Errorf("continue_on_listener_filters_timeout %v: ok %v, %+v", cont, ok, in)
		}
	}
}

func TestMatchServerNames(t *testing.T) {
	chain := func(name string, port uint32, prefixes []string, names ...string) *filterChain {
		c := &filterChain{name: name, port: port, serverNames: names}
		for _, p := range prefixes {
			c.prefixes = append(c.prefixes, netip.MustParsePrefix(p))
		}
		return c
	}
	l := &Listener{
		chains: []*filterChain{
			chain("a", 0, nil, "a.example.com"),
			chain("wild-b", 0, nil, "*.b.example.com"),
			chain("wild-deep", 0, nil, "*.x.b.example.com"),
			chain("exact-b", 0, nil, "b.example.com"),
			chain("subnet", 0, []string{"10.0.0.0/8"}),
			chain("subnet-sni", 0, []string{"10.0.0.0/8"}, "a.example.com"),
			chain("port", 8443, nil),
		},
		defaultChain: &filterChain{name: "default"},
	}
	dst := netip.MustParseAddrPort("240.0.0.1:443")
	for _, tc := range []struct {
		dst  netip.AddrPort
		sni  string
		want string
	}{
		{dst, "a.example.com", "a"},
		{dst, "A.Example.com", "a"},
		{dst, "b.example.com", "exact-b"},
		{dst, "q.b.example.com", "wild-b"},
		{dst, "q.x.b.example.com", "wild-deep"},
		{dst, "other.example.com", "default"},
		{dst, "", "default"},
		{netip.MustParseAddrPort("10.1.1.1:443"), "", "subnet"},
		{netip.MustParseAddrPort("10.1.1.1:443"), "a.example.com", "subnet-sni"},
		{netip.MustParseAddrPort("10.1.1.1:443"), "b.example.com", "subnet"},
		{netip.MustParseAddrPort("10.1.1.1:8443"), "a.example.com", "port"},
	} {
		got := l.match(tc.dst, netip.Addr{}, inspection{sni: tc.sni, transport: transportTLS})
		if got == nil || got.name != tc.want {
			t.Errorf("match(%s, %q) = %v, want %s", tc.dst, tc.sni, got, tc.want)
		}
	}
	tlsOnly := &Listener{chains: []*filterChain{{name: "tls", transport: transportTLS}, {name: "raw", transport: transportRaw}}}
	for _, tr := range []string{transportTLS, transportRaw} {
		if got := tlsOnly.match(dst, netip.Addr{}, inspection{transport: tr}); got == nil || got.name != map[string]string{transportTLS: "tls", transportRaw: "raw"}[tr] {
			t.Errorf("transport %s matched %v", tr, got)
		}
	}
}

// TestBuildGeneratedListeners builds the listeners straitd generates for
// tcp and tls routes and the fault and CORS filters (its golden file):
// strait-proxy takes all of them, and the TLS service's listener inspects
// ClientHellos.
func TestBuildGeneratedListeners(t *testing.T) {
	raw, err := os.ReadFile("../../xds/gen/testdata/filters/golden/client.listeners.json")
	if err != nil {
		t.Fatal(err)
	}
	var docs []json.RawMessage
	if err := json.Unmarshal(raw, &docs); err != nil {
		t.Fatal(err)
	}
	seen := map[string]*Listener{}
	for _, d := range docs {
		var l listenerv3.Listener
		if err := protojson.Unmarshal(d, &l); err != nil {
			t.Fatal(err)
		}
		b, err := Build(&l, Deps{Stats: stats.New()})
		if err != nil {
			t.Fatalf("strait-proxy refuses what straitd generates: %v", err)
		}
		seen[b.Name] = b
	}
	tl := seen["240.240.2.4_443"]
	if tl == nil || !tl.TLSInspector {
		t.Fatalf("TLS listener %v: want tls_inspector", tl)
	}
	dst := netip.MustParseAddrPort("240.240.2.4:443")
	if c := tl.match(dst, netip.Addr{}, inspection{sni: "x.b.example.com", transport: transportTLS}); c == nil || c.tcp == nil {
		t.Errorf("SNI x.b.example.com matched %v", c)
	}
	if c := tl.match(dst, netip.Addr{}, inspection{sni: "c.example.com", transport: transportTLS}); c != nil {
		t.Errorf("SNI c.example.com matched %v, want no chain (Istio adds no default chain to routed TLS)", c.name)
	}
}
