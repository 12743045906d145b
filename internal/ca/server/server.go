// Package server serves Istio's certificate API,
// istio.v1.auth.IstioCertificateService/CreateCertificate, in front of
// straitd's CA: it authenticates the caller's bearer token, checks that the
// CSR asks for the caller's own identity, signs, and counts what it did
// under Istio's metric names (security/pkg/server/ca/monitoring.go).
package server

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"

	"github.com/straitmesh/strait/internal/ca"
)

// Caller is an authenticated workload: the namespace and service account
// its token was issued for.
type Caller struct {
	Namespace      string
	ServiceAccount string
}

// Authenticator checks a bearer token.
type Authenticator interface {
	// Name is how refusals name this authenticator ("kubernetes", "file token").
	Name() string
	// Accepts reports whether the token has this authenticator's format,
	// so that a refusal names the reason of the one that applies.
	Accepts(token string) bool
	Authenticate(ctx context.Context, token string) (Caller, error)
}

// Options configure a Server.
type Options struct {
	CA             *ca.CA
	Authenticators []Authenticator
	// ClientCerts, when set, authenticates a caller by the workload
	// certificate it presents in the TLS handshake before its token is
	// looked at: the agent renews with its current certificate, so a
	// short-lived token only has to last until the first certificate.
	// The TLS server must request client certificates
	// (tls.RequestClientCert); ClientCerts verifies them.
	ClientCerts *ClientCerts
	// Registry receives the citadel_server_* metrics (nil: not registered).
	Registry prometheus.Registerer
	Logger   *slog.Logger
}

// Server implements IstioCertificateService.
type Server struct {
	pb.UnimplementedIstioCertificateServiceServer

	// Set at creation, read-only.
	ca          *ca.CA
	authn       []Authenticator
	clientCerts *ClientCerts
	log         *slog.Logger
	metrics     metrics
}

// Metadata keys of IstioCertificateRequest.metadata that ask for what
// Strait does not do; a request carrying them is refused by name.
const (
	metaImpersonatedIdentity = "ImpersonatedIdentity"
	metaCertSigner           = "CertSigner"
)

// New builds the server.
func New(opts Options) (*Server, error) {
	if opts.CA == nil {
		return nil, errors.New("ca server: no CA")
	}
	if len(opts.Authenticators) == 0 {
		return nil, errors.New("ca server: no authenticator (every request would be refused)")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{ca: opts.CA, authn: opts.Authenticators, clientCerts: opts.ClientCerts, log: opts.Logger.With("component", "ca-server"), metrics: newMetrics(opts.CA)}
	if opts.Registry != nil {
		if err := s.metrics.register(opts.Registry); err != nil {
			return nil, fmt.Errorf("ca server metrics: %w", err)
		}
	}
	return s, nil
}

// Register adds the service to a gRPC server.
func (s *Server) Register(g *grpc.Server) { pb.RegisterIstioCertificateServiceServer(g, s) }

// CreateCertificate signs the request's CSR for the authenticated caller.
func (s *Server) CreateCertificate(ctx context.Context, req *pb.IstioCertificateRequest) (*pb.IstioCertificateResponse, error) {
	s.metrics.csr.Inc()
	log := s.log
	if p, ok := peer.FromContext(ctx); ok {
		log = log.With("client", p.Addr.String())
	}
	caller, err := s.authenticate(ctx)
	if err != nil {
		s.metrics.authnFailure.Inc()
		log.Warn("certificate request refused", "error", err)
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	id := ca.Identity{TrustDomain: s.ca.TrustDomain(), Namespace: caller.Namespace, ServiceAccount: caller.ServiceAccount}
	log = log.With("identity", id.String())
	md := req.GetMetadata().GetFields()
	if md[metaImpersonatedIdentity].GetStringValue() != "" {
		s.metrics.authnFailure.Inc()
		return nil, status.Errorf(codes.PermissionDenied, "request metadata %s: impersonation (Istio's CA_TRUSTED_NODE_ACCOUNTS) is not supported by Strait; request a certificate as the workload itself", metaImpersonatedIdentity)
	}
	if md[metaCertSigner].GetStringValue() != "" {
		s.metrics.signError.WithLabelValues(string(ca.KindInvalidRequest)).Inc()
		return nil, status.Errorf(codes.InvalidArgument, "request metadata %s: signing with another signer (Istio's external CA) is not supported by Strait; omit it", metaCertSigner)
	}
	if req.GetValidityDuration() < 0 {
		s.metrics.signError.WithLabelValues(string(ca.KindInvalidRequest)).Inc()
		return nil, status.Errorf(codes.InvalidArgument, "validity_duration %d is negative", req.GetValidityDuration())
	}
	chain, err := s.ca.Sign(ca.SignRequest{CSR: []byte(req.GetCsr()), Identity: id, TTL: time.Duration(req.GetValidityDuration()) * time.Second})
	if err != nil {
		var se *ca.SignError
		kind, code := ca.KindSigning, codes.Internal
		if errors.As(err, &se) {
			kind = se.Kind
			switch se.Kind {
			case ca.KindInvalidRequest:
				code = codes.InvalidArgument
			case ca.KindPermissionDenied:
				code = codes.PermissionDenied
			}
		}
		s.metrics.signError.WithLabelValues(string(kind)).Inc()
		log.Warn("certificate request refused", "error", err)
		return nil, status.Errorf(code, "certificate for %s: %v", id, err)
	}
	s.metrics.success.Inc()
	log.Debug("certificate issued", "ttl_seconds", req.GetValidityDuration())
	return &pb.IstioCertificateResponse{CertChain: chain}, nil
}

// authenticate finds the caller's credential: the workload certificate it
// presented in the TLS handshake (ClientCerts, when set: an agent renews
// with its current certificate, as Istio's ClientCertAuthenticator lets
// it), else the bearer token in the request's metadata
// ("authorization: Bearer <token>", as Istio's agents send it), checked by
// the authenticator whose format it has.
func (s *Server) authenticate(ctx context.Context) (Caller, error) {
	var certErr error
	if s.clientCerts != nil {
		if chain := peerCertificates(ctx); len(chain) > 0 {
			c, err := s.clientCerts.Authenticate(chain)
			if err == nil {
				return c, nil
			}
			certErr = fmt.Errorf("client certificate: %w", err)
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	c, err := AuthenticateBearer(ctx, s.authn, md.Get("authorization"))
	if err != nil && certErr != nil {
		return Caller{}, fmt.Errorf("%w; %w", certErr, err)
	}
	return c, err
}

// AuthenticateBearer checks the token of an authorization header or
// metadata ("Bearer <token>"; the first value counts) with the
// authenticator of authn whose format it has. straitd's debug endpoints
// use it too.
func AuthenticateBearer(ctx context.Context, authn []Authenticator, authorization []string) (Caller, error) {
	if len(authorization) == 0 {
		return Caller{}, ErrNoToken
	}
	tok, ok := cutBearer(authorization[0])
	if !ok || tok == "" {
		return Caller{}, errors.New(`the authorization metadata is not "Bearer <token>"`)
	}
	var reasons []string
	for _, a := range authn {
		if !a.Accepts(tok) {
			continue
		}
		c, err := a.Authenticate(ctx, tok)
		if err == nil {
			return c, nil
		}
		reasons = append(reasons, a.Name()+": "+err.Error())
	}
	if len(reasons) == 0 {
		names := make([]string, len(authn))
		for i, a := range authn {
			names[i] = a.Name()
		}
		return Caller{}, fmt.Errorf("the bearer token has a format none of this straitd's authenticators (%s) reads", strings.Join(names, ", "))
	}
	return Caller{}, errors.New("authentication failed: " + strings.Join(reasons, "; "))
}

// ErrNoToken is AuthenticateBearer's error when there is no authorization.
var ErrNoToken = errors.New(`no bearer token: send "authorization: Bearer <token>" (a service-account token with audience istio-ca, or a token from straitctl token create)`)

// peerCertificates is the certificate chain the caller presented in the
// TLS handshake (none on a plaintext connection).
func peerCertificates(ctx context.Context) []*x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil
	}
	return ti.State.PeerCertificates
}

func cutBearer(v string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

var _ pb.IstioCertificateServiceServer = (*Server)(nil)
