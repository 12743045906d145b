package tlsconf

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"
)

// wrapper is a replaying connection as the proxy's are: it exposes the
// connection under it with NetConn.
type wrapper struct{ net.Conn }

func (w wrapper) NetConn() net.Conn { return w.Conn }

// opaque wraps a connection without saying what it wraps.
type opaque struct{ net.Conn }

func TestTerminated(t *testing.T) {
	raw, peer := net.Pipe()
	defer raw.Close()
	defer peer.Close()
	tc := tls.Server(wrapper{raw}, &tls.Config{})
	for _, tc0 := range []struct {
		name   string
		c      net.Conn
		want   *tls.Conn
		layers int
	}{
		{"clear text", raw, nil, 1},
		{"clear text under a wrapper", wrapper{raw}, nil, 2},
		{"the TLS connection", tc, tc, 3},
		{"TLS under wrappers", wrapper{wrapper{tc}}, tc, 5},
		{"TLS under a wrapper that hides it", opaque{tc}, nil, 1},
	} {
		if got := Terminated(tc0.c); got != tc0.want {
			t.Errorf("%s: Terminated = %p, want %p", tc0.name, got, tc0.want)
		}
		n := 0
		for range Layers(tc0.c) {
			n++
		}
		if n != tc0.layers {
			t.Errorf("%s: %d layers, want %d", tc0.name, n, tc0.layers)
		}
	}
}

// TestLocalCertificate: after a server handshake, the connection (also
// under a wrapper) tells which certificate the proxy presented, the one
// from SDS with the server's SPIFFE ID, and still exposes its *tls.Conn
// to Terminated; a connection in clear text has none.
func TestLocalCertificate(t *testing.T) {
	p := newPair(t, nil, true)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type result struct {
		sc  *ServerConn
		err error
	}
	res := make(chan result, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			res <- result{err: err}
			return
		}
		sc, err := p.server.Handshake(ctx, c)
		res <- result{sc, err}
	}()
	raw, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := p.client.Handshake(ctx, raw); err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	r := <-res
	if r.err != nil {
		t.Fatalf("server handshake: %v", r.err)
	}
	defer r.sc.Close()
	for _, c := range []net.Conn{r.sc, wrapper{r.sc}} {
		leaf := LocalCertificate(c)
		if leaf == nil || len(leaf.URIs) != 1 || leaf.URIs[0].String() != serverID {
			t.Fatalf("LocalCertificate = %v, want the certificate of %s", leaf, serverID)
		}
		if Terminated(c) != r.sc.Conn {
			t.Errorf("Terminated does not find the TLS connection under the ServerConn")
		}
	}
	if LocalCertificate(raw) != nil || LocalCertificate(wrapper{raw}) != nil {
		t.Errorf("LocalCertificate of a clear-text connection is not nil")
	}
	if LocalCertificate(&ServerConn{Conn: r.sc.Conn}) != nil {
		t.Errorf("LocalCertificate with no certificate presented is not nil")
	}
}
