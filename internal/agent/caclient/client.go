// Package caclient is the agent's side of straitd's TLS port: transport
// credentials that trust the mesh root, and a client of Istio's
// certificate API that sends the workload's bearer token.
package caclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	pb "istio.io/api/security/v1alpha1"
)

// TLSOptions configure TransportCredentials.
type TLSOptions struct {
	// Addr is the host:port dialed.
	Addr string
	// RootPath is a PEM file of trusted roots, read once by
	// TransportCredentials.
	RootPath string
	// ServerName is checked in the server's certificate instead of Addr's
	// host (ISTIOD_SAN); Addr's host may be a name or an IP address.
	ServerName string
	// ExtraRoots, if set, returns more roots to trust at each handshake:
	// the trust bundle of the agent's latest certificate, so a mesh root
	// rotation (new root added, then the old one dropped) does not cut the
	// agent off from the control plane before it restarts.
	ExtraRoots func() []*x509.Certificate
	// ClientCertificate, if set, returns the certificate to present when
	// the server asks for one (nil: none): the workload's current
	// certificate, with which straitd's CA lets the agent renew once its
	// token has expired (see internal/ca/server ClientCerts).
	ClientCertificate func() *tls.Certificate
}

// TransportCredentials are TLS credentials that trust the roots of
// RootPath plus ExtraRoots, and nothing else (not the system roots).
func TransportCredentials(o TLSOptions) (credentials.TransportCredentials, error) {
	pemData, err := os.ReadFile(o.RootPath)
	if err != nil {
		return nil, fmt.Errorf("mesh root for %s: %w (mount the mesh root there, or set XDS_ROOT_CA / CA_ROOT_CA)", o.Addr, err)
	}
	fileRoots := x509.NewCertPool()
	if !fileRoots.AppendCertsFromPEM(pemData) {
		return nil, fmt.Errorf("mesh root %s holds no PEM certificate", o.RootPath)
	}
	host, _, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", o.Addr, err)
	}
	serverName := o.ServerName
	if serverName == "" {
		serverName = host
	}
	cfg := &tls.Config{RootCAs: fileRoots, ServerName: serverName, MinVersion: tls.VersionTLS12}
	if o.ClientCertificate != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if c := o.ClientCertificate(); c != nil {
				return c, nil
			}
			return &tls.Certificate{}, nil // none: the token authenticates
		}
	}
	if o.ExtraRoots != nil {
		// crypto/tls verifies against one fixed pool; this one changes, so
		// the chain is verified here, with the same checks (chain to a
		// root, server auth, the name).
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: the server sent no certificate")
			}
			roots := fileRoots.Clone()
			for _, r := range o.ExtraRoots() {
				roots.AddCert(r)
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: serverName, Roots: roots, Intermediates: inter,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			if err != nil {
				return fmt.Errorf("tls: verify %s's certificate: %w", o.Addr, err)
			}
			return nil
		}
	}
	return credentials.NewTLS(cfg), nil
}

// Options configure a Client.
type Options struct {
	// Conn is a connection to the CA (grpc.NewClient with TransportCredentials).
	Conn grpc.ClientConnInterface
	// TokenPath is read before every request, as the kubelet rotates the
	// projected token.
	TokenPath string
	// HasClientCertificate, if set, reports whether the connection
	// presents a valid workload certificate (TLSOptions.ClientCertificate);
	// then a missing token file is no error, the certificate
	// authenticates the request.
	HasClientCertificate func() bool
}

// Client requests certificates.
type Client struct {
	opts   Options
	client pb.IstioCertificateServiceClient
}

// New builds a Client.
func New(opts Options) (*Client, error) {
	if opts.Conn == nil {
		return nil, errors.New("caclient: no connection")
	}
	if opts.TokenPath == "" {
		return nil, errors.New("caclient: no token path")
	}
	return &Client{opts: opts, client: pb.NewIstioCertificateServiceClient(opts.Conn)}, nil
}

// Sign sends the CSR and returns the certificate chain as the CA answered
// it: leaf first, the trust bundle last.
func (c *Client) Sign(ctx context.Context, csrPEM []byte, ttl time.Duration) ([]string, error) {
	tok, err := os.ReadFile(c.opts.TokenPath)
	switch {
	case err == nil:
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+strings.TrimSpace(string(tok)))
	case errors.Is(err, os.ErrNotExist) && c.opts.HasClientCertificate != nil && c.opts.HasClientCertificate():
		// Renewal with the current certificate alone.
	default:
		return nil, fmt.Errorf("workload token: %w (on Kubernetes the projected service-account token; in file mode the output of straitctl token create)", err)
	}
	resp, err := c.client.CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: string(csrPEM), ValidityDuration: int64(ttl / time.Second)})
	if err != nil {
		return nil, fmt.Errorf("CreateCertificate: %w", err)
	}
	if len(resp.GetCertChain()) < 2 {
		return nil, fmt.Errorf("CreateCertificate: the response has %d certificates; want the leaf and the root at least", len(resp.GetCertChain()))
	}
	return resp.GetCertChain(), nil
}

// PerCallConn dials a new connection for every call and closes it after:
// each certificate request then makes a TLS handshake of its own, which
// presents the workload certificate of that moment (a long-lived
// connection would keep showing the server the certificate, or the
// absence of one, of its first handshake). Istio's citadel client
// reconnects when its certificate changes for the same reason. Streams
// are not supported.
type PerCallConn struct {
	Target string
	Opts   []grpc.DialOption
}

// Invoke implements grpc.ClientConnInterface.
func (p PerCallConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	cc, err := grpc.NewClient(p.Target, p.Opts...)
	if err != nil {
		return err
	}
	defer cc.Close()
	return cc.Invoke(ctx, method, args, reply, opts...)
}

// NewStream implements grpc.ClientConnInterface: refused.
func (p PerCallConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, errors.New("caclient: PerCallConn carries unary calls only")
}

var _ grpc.ClientConnInterface = PerCallConn{}

// TokenCredentials send the workload token as "authorization: Bearer" on
// every RPC of a TLS connection, read from the file each time; no header
// when the file is absent. Istio's pilot-discovery authenticates xDS
// streams on 15012 this way; straitd does not require it.
type TokenCredentials struct {
	Path string
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (t TokenCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	tok, err := os.ReadFile(t.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("workload token: %w", err)
	}
	return map[string]string{"authorization": "Bearer " + strings.TrimSpace(string(tok))}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: the
// token never goes over plaintext.
func (TokenCredentials) RequireTransportSecurity() bool { return true }

var _ credentials.PerRPCCredentials = TokenCredentials{}
