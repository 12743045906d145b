package accesslog

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// namedConn is a connection that read a ClientHello without terminating
// TLS, as the listener's tls_inspector does.
type namedConn struct {
	net.Conn
	sni string
}

func (n *namedConn) RequestedServerName() string { return n.sni }
func (n *namedConn) NetConn() net.Conn           { return n.Conn }

// TestConnOf describes real loopback connections: a TLS connection
// terminated over an inspected one takes the handshake's SNI and state; a
// passed-through one the inspector's SNI; addresses are the socket's,
// IPv4-mapped ones unmapped.
func TestConnOf(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server := <-accepted
	defer server.Close()

	inspected := &namedConn{Conn: server, sni: "from.inspector"}
	plain := ConnOf(inspected)
	if plain.SNI != "from.inspector" || plain.TLS != nil || plain.DirectRemote.String() != client.LocalAddr().String() || plain.DirectLocal.String() != ln.Addr().String() {
		t.Errorf("passed through: %+v", plain)
	}

	cert := tlsCert(t)
	tc := tls.Server(inspected, &tls.Config{Certificates: []tls.Certificate{cert}})
	done := make(chan error, 1)
	go func() {
		cc := tls.Client(client, &tls.Config{ServerName: "from.handshake", InsecureSkipVerify: true}) //nolint:gosec // test peer
		done <- cc.Handshake()
	}()
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := ConnOf(tc)
	if got.SNI != "from.handshake" || got.TLS == nil || got.TLS.Version != tls.VersionTLS13 || got.DirectRemote != plain.DirectRemote {
		t.Errorf("terminated: %+v", got)
	}

	if ap := addrPortOf(&net.TCPAddr{IP: net.ParseIP("::ffff:10.1.2.3"), Port: 80}); ap != netip.MustParseAddrPort("10.1.2.3:80") {
		t.Errorf("mapped address: %s", ap)
	}
	if ap := addrPortOf(&net.UnixAddr{Name: "/x", Net: "unix"}); ap.IsValid() {
		t.Errorf("unix address: %s", ap)
	}
	if ap := AddrPortOf(nil); ap.IsValid() {
		t.Errorf("nil address: %s", ap)
	}
}

func tlsCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"from.handshake"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestOperatorBoundaries: operator names with the edge characters of
// Envoy's [A-Z0-9_]; formats that end inside an operator; a length with
// 0 and 9; an empty main header; serial 0; the padded time fields at 10.
func TestOperatorBoundaries(t *testing.T) {
	for _, format := range []string{"%A%", "%Z%", "%X0%", "%X9%"} {
		_, err := ParseText(format)
		if err == nil || !strings.Contains(err.Error(), format+" is not supported") {
			t.Errorf("%s: %v, want it refused by name", format, err)
		}
	}
	for _, format := range []string{"%REQ", "%REQ(a)", "%REQ(a):12", "%REQ(a):"} {
		if _, err := ParseText(format); err == nil {
			t.Errorf("%s: accepted", format)
		}
	}
	r := &Record{Request: HTTPHeader{"Long": {"abcdefghijkl"}, "User-Agent": {"curl/8"}}}
	for format, want := range map[string]string{
		"%REQ(LONG):10%":         "abcdefghij",
		"%REQ(LONG):9%":          "abcdefghi",
		"%REQ(?USER-AGENT)%":     "curl/8",
		"%REQ(LONG?USER-AGENT)%": "abcdefghijkl",
	} {
		f, err := ParseText(format)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if got := string(f.Append(nil, r)); got != want {
			t.Errorf("%s: %q, want %q", format, got, want)
		}
	}
	f, _ := ParseText("%DOWNSTREAM_PEER_SERIAL%")
	zero := &Record{Conn: &Conn{TLS: &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{SerialNumber: big.NewInt(0)}}}}}
	if got := string(f.Append(nil, zero)); got != "0" {
		t.Errorf("serial 0: %q", got)
	}
	tf, _ := ParseText("%START_TIME([%e][%k][%l])%")
	for hour, want := range map[int]string{10: "[10][10][10]", 9: "[10][ 9][ 9]", 22: "[10][22][10]"} {
		if got := string(tf.Append(nil, &Record{Start: time.Date(2026, 3, 10, hour, 0, 0, 0, time.UTC)})); got != want {
			t.Errorf("hour %d: %q, want %q", hour, got, want)
		}
	}
}
