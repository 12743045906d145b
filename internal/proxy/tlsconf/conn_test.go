package tlsconf

import (
	"crypto/tls"
	"net"
	"testing"
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
