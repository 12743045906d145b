package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
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

// ServerConn is a connection on which the proxy ran the server side of
// TLS: the *tls.Conn, and the certificate the proxy presented (which
// crypto/tls does not keep), for what reads the local certificate, as the
// HCM's x-forwarded-client-cert By does.
type ServerConn struct {
	*tls.Conn
	local *tls.Certificate // nil when the handshake chose none
}

// NetConn returns the TLS connection, so that Layers and Terminated see it.
func (c *ServerConn) NetConn() net.Conn { return c.Conn }

// LocalCertificate returns the leaf certificate the proxy presented on the
// TLS connection it terminated under c; nil for a connection in clear
// text, TLS passed through, or a certificate that does not parse.
func LocalCertificate(c net.Conn) *x509.Certificate {
	for l := range Layers(c) {
		sc, ok := l.(*ServerConn)
		if !ok {
			continue
		}
		if sc.local == nil || len(sc.local.Certificate) == 0 {
			return nil
		}
		if sc.local.Leaf != nil {
			return sc.local.Leaf
		}
		leaf, err := x509.ParseCertificate(sc.local.Certificate[0])
		if err != nil {
			return nil
		}
		return leaf
	}
	return nil
}

// ClientConn is a connection on which the proxy ran the client side of
// TLS (an upstream connection): the *tls.Conn, and the SPIFFE identities
// of both sides read once after the handshake, for what labels the
// requests sent over it (istio.stats' destination_principal and
// source_principal on the source reporter).
type ClientConn struct {
	*tls.Conn
	peer, local string
}

func newClientConn(tc *tls.Conn, local *tls.Certificate) *ClientConn {
	c := &ClientConn{Conn: tc}
	if pc := tc.ConnectionState().PeerCertificates; len(pc) > 0 {
		c.peer = firstURI(pc[0])
	}
	if local != nil && len(local.Certificate) > 0 {
		leaf := local.Leaf
		if leaf == nil {
			leaf, _ = x509.ParseCertificate(local.Certificate[0]) // nil when it does not parse: no identity
		}
		c.local = firstURI(leaf)
	}
	return c
}

// NetConn returns the TLS connection, so that Layers sees it.
func (c *ClientConn) NetConn() net.Conn { return c.Conn }

// UpstreamPrincipals returns the first URI SAN of the certificate the
// upstream presented (peer) and of the one the proxy presented (local)
// on the client TLS connection under c; "" for what is unknown (clear
// text, no certificate, no URI SAN).
func UpstreamPrincipals(c net.Conn) (peer, local string) {
	for l := range Layers(c) {
		if cc, ok := l.(*ClientConn); ok {
			return cc.peer, cc.local
		}
	}
	return "", ""
}

func firstURI(c *x509.Certificate) string {
	if c == nil || len(c.URIs) == 0 {
		return ""
	}
	return c.URIs[0].String()
}
