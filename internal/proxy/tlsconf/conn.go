package tlsconf

import (
	"crypto/tls"
	"iter"
	"net"
)

// Layers yields c and each connection under it, found by looking through
// wrappers that expose the connection they wrap with NetConn: crypto/tls
// itself, and the proxy's replaying connections (the TLS inspector's, the
// HCM's protocol sniffing). The first is the outermost.
func Layers(c net.Conn) iter.Seq[net.Conn] {
	return func(yield func(net.Conn) bool) {
		for c != nil {
			if !yield(c) {
				return
			}
			u, ok := c.(interface{ NetConn() net.Conn })
			if !ok {
				return
			}
			c = u.NetConn()
		}
	}
}

// Terminated returns the TLS connection the proxy terminated under c (the
// outermost *tls.Conn of Layers(c)); nil for a connection in clear text
// or TLS passed through.
func Terminated(c net.Conn) *tls.Conn {
	for l := range Layers(c) {
		if tc, ok := l.(*tls.Conn); ok {
			return tc
		}
	}
	return nil
}
