package sds

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/xdsapi"
)

// ServerOptions configure a Server.
type ServerOptions struct {
	// Store holds the workload certificate ("default", "ROOTCA"); nil
	// when the agent has none (certificates off): then only file-backed
	// resources are served.
	Store *Store
	// FilePoll is how often the files of file-cert:/file-root: resources
	// are read again for changes (default 5 s).
	FilePoll time.Duration
	// CredentialsDir holds the Gateway credentials served as
	// "kubernetes://NAME" (files.go); "" serves none.
	CredentialsDir string
	Logger         *slog.Logger
}

// defaultFilePoll is ServerOptions.FilePoll's default.
const defaultFilePoll = 5 * time.Second

// Server serves SDS, state of the world over gRPC (StreamSecrets and
// FetchSecrets). Delta SDS is refused (Unimplemented) so a client that
// asks for it learns so at once instead of waiting.
type Server struct {
	secretv3.UnimplementedSecretDiscoveryServiceServer

	// Set at creation, read-only.
	store          *Store
	filePoll       time.Duration
	credentialsDir string
	log            *slog.Logger
	grpc           *grpc.Server

	nonce atomic.Uint64
}

// NewServer builds the server.
func NewServer(opts ServerOptions) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.FilePoll <= 0 {
		opts.FilePoll = defaultFilePoll
	}
	s := &Server{store: opts.Store, filePoll: opts.FilePoll, credentialsDir: opts.CredentialsDir, log: opts.Logger.With("component", "sds"), grpc: grpc.NewServer()}
	secretv3.RegisterSecretDiscoveryServiceServer(s.grpc, s)
	return s
}

// ListenUnix listens on the workload socket, creating its directory and
// replacing a stale socket. The socket is 0600: only the agent's user (the
// proxy runs as the same user) may fetch the key.
func ListenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("sds socket: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("sds socket: remove stale %s: %w", path, err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("sds socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		lis.Close()
		return nil, fmt.Errorf("sds socket: %w", err)
	}
	return lis, nil
}

// Serve serves on lis until Stop.
func (s *Server) Serve(lis net.Listener) error {
	s.log.Info("serving sds", "socket", lis.Addr().String())
	return s.grpc.Serve(lis)
}

// Stop closes the listener and every stream.
func (s *Server) Stop() { s.grpc.Stop() }

// current returns the workload secrets (nil when there are none yet or
// the agent has none) and a channel closed when they change (nil, never
// ready, without a store).
func (s *Server) current() (*Secrets, <-chan struct{}) {
	if s.store == nil {
		return nil, nil
	}
	return s.store.Current()
}

// StreamSecrets serves one SotW SDS stream: it answers a request for new
// resource names with the current secrets (waiting for the first
// certificate if there is none yet), and pushes every renewal and every
// change of a file-backed resource's files.
func (s *Server) StreamSecrets(stream grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]) error {
	ctx := stream.Context()
	reqs := make(chan *discovery.DiscoveryRequest)
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case reqs <- req:
			case <-ctx.Done():
				return
			}
		}
	}()
	poll := time.NewTicker(s.filePoll)
	defer poll.Stop()

	var (
		names       []string // resources this stream subscribes to
		sentVersion string   // version of the secrets last sent ("" = none)
		lastNonce   string
		lastErr     string // the last file error logged, not repeated
	)
	for {
		cur, changed := s.current()
		if len(names) > 0 {
			resp, err := s.response(names, cur)
			switch {
			case err != nil:
				// A file that cannot be read yet: the proxy keeps what it
				// has (or waits), and the next poll tries again.
				if err.Error() != lastErr {
					s.log.Warn("sds resource not served", "resources", names, "error", err)
					lastErr = err.Error()
				}
			case resp != nil && resp.VersionInfo != sentVersion:
				if err := stream.Send(resp); err != nil {
					return err
				}
				sentVersion, lastNonce, lastErr = resp.VersionInfo, resp.Nonce, ""
				s.log.Debug("sds push", "resources", names, "version", resp.VersionInfo)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-recvErr:
			if status.Code(err) == codes.Canceled || errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		case <-changed:
		case <-poll.C:
		case req := <-reqs:
			if req.GetTypeUrl() != "" && req.GetTypeUrl() != xdsapi.SecretType {
				return status.Errorf(codes.InvalidArgument, "type_url %q: this SDS server serves only %s", req.GetTypeUrl(), xdsapi.SecretType)
			}
			if err := s.checkNames(req.GetResourceNames()); err != nil {
				return err
			}
			if d := req.GetErrorDetail(); d != nil && req.GetResponseNonce() == lastNonce {
				s.log.Warn("proxy rejected secrets", "version", sentVersion, "error", d.GetMessage())
			}
			if !sameNames(names, req.GetResourceNames()) {
				names = slices.Clone(req.GetResourceNames())
				sentVersion = "" // new subscription: send what there is
			}
		}
	}
}

// FetchSecrets answers one request with the current secrets.
func (s *Server) FetchSecrets(ctx context.Context, req *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	if err := s.checkNames(req.GetResourceNames()); err != nil {
		return nil, err
	}
	for {
		cur, changed := s.current()
		resp, err := s.response(req.GetResourceNames(), cur)
		if err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		if resp != nil {
			return resp, nil
		}
		select {
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-changed:
		}
	}
}

// checkNames refuses, by name, resources this server does not serve: the
// workload certificate when the agent has none, and malformed file-backed
// names.
func (s *Server) checkNames(names []string) error {
	for _, n := range names {
		if n == ResourceDefault || n == ResourceRootCA {
			if s.store == nil {
				return status.Errorf(codes.InvalidArgument, "SDS resource %q: this agent has no workload certificate (its CA address is plaintext; straitd serves its CA on TLS 15012)", n)
			}
			continue
		}
		_, ok, err := s.resource(n)
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		if !ok {
			return status.Errorf(codes.InvalidArgument, "SDS resource %q is not served by strait-agent: only %q (the workload certificate), %q (the trust bundle), %sCERT~KEY and %sCA (files on this host), %sNAME (a Gateway credential)",
				n, ResourceDefault, ResourceRootCA, fileCertPrefix, fileRootPrefix, credentialPrefix)
		}
	}
	return nil
}

// resource parses a file-backed name: file-cert:, file-root: or a
// Gateway credential (kubernetes://).
func (s *Server) resource(name string) (fileResource, bool, error) {
	if r, ok, err := credentialResource(s.credentialsDir, name); ok {
		return r, ok, err
	}
	return parseFileResource(name)
}

func sameNames(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// response is the answer for names: nil while a workload secret is asked
// for and there is none yet, an error when a file-backed one cannot be
// read. Its version is the workload certificate's and, when files are
// served, a digest of their contents, so that a changed file is a new
// version.
func (s *Server) response(names []string, cur *Secrets) (*discovery.DiscoveryResponse, error) {
	resp := &discovery.DiscoveryResponse{TypeUrl: xdsapi.SecretType}
	var (
		version  []string
		hasFiles bool
	)
	files := sha256.New()
	for _, n := range names {
		var sec *tlsv3.Secret
		if n == ResourceDefault || n == ResourceRootCA {
			if cur == nil {
				return nil, nil
			}
			if len(version) == 0 {
				version = append(version, cur.Version)
			}
			sec = Secret(n, cur)
		} else {
			r, _, err := s.resource(n)
			if err != nil {
				return nil, err
			}
			var raw []byte
			if sec, raw, err = r.read(n); err != nil {
				return nil, err
			}
			files.Write([]byte(n))
			files.Write(raw)
			hasFiles = true
		}
		a, err := anypb.New(sec)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "encode secret %s: %v", n, err)
		}
		resp.Resources = append(resp.Resources, a)
	}
	if hasFiles {
		version = append(version, "files-"+hex.EncodeToString(files.Sum(nil))[:16])
	}
	resp.VersionInfo = strings.Join(version, "+")
	resp.Nonce = strconv.FormatUint(s.nonce.Add(1), 10)
	return resp, nil
}

// Secret is the Envoy resource for name: "default" is the key and
// certificate chain, "ROOTCA" the trust bundle, both inline as Istio's
// agent sends them.
func Secret(name string, cur *Secrets) *tlsv3.Secret {
	inline := func(b []byte) *core.DataSource {
		return &core.DataSource{Specifier: &core.DataSource_InlineBytes{InlineBytes: b}}
	}
	if name == ResourceRootCA {
		return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: inline(cur.RootPEM),
		}}}
	}
	return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inline(cur.CertChainPEM),
		PrivateKey:       inline(cur.KeyPEM),
	}}}
}

var _ secretv3.SecretDiscoveryServiceServer = (*Server)(nil)
