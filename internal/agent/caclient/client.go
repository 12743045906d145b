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

// TransportCredentials are TLS credentials for dialing addr that trust only
// the roots in the PEM file rootPath. The server name checked is
// serverName, or when empty addr's host, as a name or an IP address
// (straitd's certificate carries its Service names, loopback and its listen
// address). The file is read now;
// a mesh root rotation reaches the agent through its certificate responses,
// and a restart rereads the file.
func TransportCredentials(addr, rootPath, serverName string) (credentials.TransportCredentials, error) {
	pemData, err := os.ReadFile(rootPath)
	if err != nil {
		return nil, fmt.Errorf("mesh root for %s: %w (mount the mesh root there, or set XDS_ROOT_CA / CA_ROOT_CA)", addr, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, fmt.Errorf("mesh root %s holds no PEM certificate", rootPath)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", addr, err)
	}
	if serverName == "" {
		serverName = host
	}
	return credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}), nil
}

// Options configure a Client.
type Options struct {
	// Conn is a connection to the CA (grpc.NewClient with TransportCredentials).
	Conn grpc.ClientConnInterface
	// TokenPath is read before every request, as the kubelet rotates the
	// projected token.
	TokenPath string
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
	if err != nil {
		return nil, fmt.Errorf("workload token: %w (on Kubernetes the projected service-account token; in file mode the output of straitctl token create)", err)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := c.client.CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: string(csrPEM), ValidityDuration: int64(ttl / time.Second)})
	if err != nil {
		return nil, fmt.Errorf("CreateCertificate: %w", err)
	}
	if len(resp.GetCertChain()) < 2 {
		return nil, fmt.Errorf("CreateCertificate: the response has %d certificates; want the leaf and the root at least", len(resp.GetCertChain()))
	}
	return resp.GetCertChain(), nil
}

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
