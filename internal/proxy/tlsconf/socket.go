package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"github.com/straitmesh/strait/internal/proxy/http1"
)

// Client is a cluster's upstream TLS socket. Read-only once built.
type Client struct {
	c        *common
	sni      string
	sessions *sessionCache // resume.go
}

// NewClient builds the upstream socket of ts: nil (plaintext) for no
// socket or raw_buffer, an error naming any field it does not implement.
func NewClient(ts *corev3.TransportSocket, p *Provider) (*Client, error) {
	ok, err := isTLS(ts, upstreamType)
	if !ok || err != nil {
		return nil, err
	}
	var u tlsv3.UpstreamTlsContext
	if err := ts.GetTypedConfig().UnmarshalTo(&u); err != nil {
		return nil, fmt.Errorf("transport_socket %q: typed_config: %w", ts.GetName(), err)
	}
	const path = "transport_socket.UpstreamTlsContext"
	if err := fieldaudit.Check(path, u.ProtoReflect(), upstreamHonoured, upstreamRefused); err != nil {
		return nil, err
	}
	c, err := buildCommon(u.GetCommonTlsContext(), p, path+".common_tls_context")
	if err != nil {
		return nil, err
	}
	maxKeys := uint32(1) // Envoy's default
	if m := u.GetMaxSessionKeys(); m != nil {
		maxKeys = m.GetValue()
	}
	return &Client{c: c, sni: u.GetSni(), sessions: newSessionCache(maxKeys)}, nil
}

// Handshake runs the client side of TLS on conn (closed on failure). It
// waits for the context's secrets first, bounded by ctx.
func (cl *Client) Handshake(ctx context.Context, conn net.Conn) (*ClientConn, error) {
	if err := cl.c.wait(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	cfg := cl.c.baseConfig()
	cfg.ServerName = cl.sni
	cfg.NextProtos = cl.c.alpn
	// Verification is ours (VerifyPeerCertificate), against the trust
	// bundle current at this handshake; without one the peer is not
	// verified, as Envoy does without a validation context.
	cfg.InsecureSkipVerify = true
	if cl.c.roots != nil {
		cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error { return cl.c.verify(raw) }
	}
	// The certificate this handshake presents, read once: the session it
	// resumes (if any) was made with it (resume.go).
	var cert, presented *tls.Certificate
	if cl.c.cert != nil {
		c, err := cl.c.currentCert()
		if err != nil {
			conn.Close()
			return nil, err
		}
		cert = c
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			presented = cert
			return cert, nil
		}
	}
	if cache := cl.sessions.forCert(cert); cache != nil {
		cfg.ClientSessionCache = cache
		cfg.VerifyConnection = func(cs tls.ConnectionState) error { return cl.c.verifyResumed(cs, false) }
	}
	tc, err := handshake(ctx, conn, tls.Client(http1.WrapConn(conn), cfg))
	if err != nil {
		return nil, err
	}
	if tc.ConnectionState().DidResume {
		presented = cert // the session was made with it (certSessions)
	}
	return newClientConn(tc, presented), nil
}

// Server is a filter chain's downstream TLS socket. Read-only once built.
type Server struct {
	c             *common
	requireClient bool
	requireSNI    bool
	noTickets     bool
	tickets       ticketKeys   // resume.go
	prints        fingerprints // of the certificate the tickets name
}

// NewServer builds the downstream socket of ts: nil (plaintext) for no
// socket or raw_buffer, an error naming any field it does not implement.
func NewServer(ts *corev3.TransportSocket, p *Provider) (*Server, error) {
	ok, err := isTLS(ts, downstreamType)
	if !ok || err != nil {
		return nil, err
	}
	var d tlsv3.DownstreamTlsContext
	if err := ts.GetTypedConfig().UnmarshalTo(&d); err != nil {
		return nil, fmt.Errorf("transport_socket %q: typed_config: %w", ts.GetName(), err)
	}
	const path = "transport_socket.DownstreamTlsContext"
	if err := fieldaudit.Check(path, d.ProtoReflect(), downstreamHonoured, downstreamRefused); err != nil {
		return nil, err
	}
	c, err := buildCommon(d.GetCommonTlsContext(), p, path+".common_tls_context")
	if err != nil {
		return nil, err
	}
	if c.cert == nil {
		return nil, fmt.Errorf("%s.common_tls_context: a server needs a certificate (tls_certificates or tls_certificate_sds_secret_configs)", path)
	}
	s := &Server{c: c, requireClient: d.GetRequireClientCertificate().GetValue(), requireSNI: d.GetRequireSni().GetValue(),
		noTickets: d.GetDisableStatelessSessionResumption()}
	if s.requireClient && c.roots == nil {
		return nil, fmt.Errorf("%s.require_client_certificate needs a validation context with a trust bundle", path)
	}
	return s, nil
}

// Handshake runs the server side of TLS on conn (closed on failure).
func (s *Server) Handshake(ctx context.Context, conn net.Conn) (*ServerConn, error) {
	if err := s.c.wait(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	cfg := s.c.baseConfig()
	cfg.SessionTicketsDisabled = s.noTickets
	if !s.noTickets {
		keys, err := s.tickets.current(time.Now())
		if err != nil {
			conn.Close()
			return nil, err
		}
		bindTickets(cfg, keys, &s.prints, s.c.currentCert)
		cfg.VerifyConnection = func(cs tls.ConnectionState) error { return s.c.verifyResumed(cs, !s.requireClient) }
	}
	// presented is the certificate GetCertificate chose; the handshake
	// (and so the callback) is done when handshake returns. A resumed
	// session chooses none: its ticket named the current certificate.
	var presented *tls.Certificate
	cfg.GetCertificate = func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if s.requireSNI && h.ServerName == "" {
			return nil, fmt.Errorf("tls: client sent no SNI and require_sni is set")
		}
		cert, err := s.c.currentCert()
		presented = cert
		return cert, err
	}
	switch {
	case s.requireClient:
		cfg.ClientAuth = tls.RequireAnyClientCert
	case s.c.roots != nil:
		cfg.ClientAuth = tls.RequestClientCert
	}
	if s.c.roots != nil {
		cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return nil // optional client certificate not given
			}
			return s.c.verify(raw)
		}
	}
	// ALPN as BoringSSL selects it for Envoy: the first of the server's
	// protocols that the client offers, and no protocol (rather than a
	// failed handshake, as crypto/tls would do) when none is common.
	alpn := s.c.alpn
	cfg.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		out := cfg.Clone()
		out.GetConfigForClient = nil
		for _, p := range alpn {
			if slices.Contains(h.SupportedProtos, p) {
				out.NextProtos = []string{p}
				break
			}
		}
		return out, nil
	}
	tc, err := handshake(ctx, conn, tls.Server(http1.WrapConn(conn), cfg))
	if err != nil {
		return nil, err
	}
	if presented == nil && tc.ConnectionState().DidResume {
		presented, _ = s.c.currentCert() // the handshake read it; it cannot fail now
	}
	return &ServerConn{Conn: tc, local: presented}, nil
}
