package listener

import (
	"net"
	"testing"

	"github.com/straitmesh/strait/internal/proxy/http1"
)

// TestRawTCPUnderTLS: the TCP connection a chain terminates TLS on is read
// and written with raw system calls (http1.WrapConn), also behind the TLS
// inspector's replaying wrapper, which keeps its replayed bytes.
func TestRawTCPUnderTLS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		name string
		wrap func(net.Conn) net.Conn
		pre  string
	}{
		{"plain", func(c net.Conn) net.Conn { return c }, ""},
		{"inspected", func(c net.Conn) net.Conn { return replayConn(c, []byte("hello ")) }, "hello "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			sc, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			c := rawTCP(tc.wrap(sc))
			defer c.Close()
			under := c
			if p, ok := c.(*prefixedConn); ok {
				under = p.Conn
			}
			if http1.RawSyscallConn(under) == nil {
				t.Fatalf("rawTCP(%T) left %T under it, not a raw connection", sc, under)
			}
			if _, err := cc.Write([]byte("world")); err != nil {
				t.Fatal(err)
			}
			want := tc.pre + "world"
			got := make([]byte, 0, len(want))
			buf := make([]byte, 64)
			for len(got) < len(want) {
				n, err := c.Read(buf)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, buf[:n]...)
			}
			if string(got) != want {
				t.Errorf("read %q, want %q", got, want)
			}
		})
	}
}
