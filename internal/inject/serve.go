package inject

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// DefaultWebhookAddr is where the injection webhook listens (Istio's 15017).
const DefaultWebhookAddr = ":15017"

// ServerOptions configure the HTTPS server of the webhook.
type ServerOptions struct {
	// Addr defaults to ":15017".
	Addr string
	// CertFile and KeyFile are the serving certificate and key (PEM).
	// They are re-read when they change, so a rotated certificate is
	// served without a restart. Empty: a self-signed pair is made, and
	// CABundle returns the CA to put in the MutatingWebhookConfiguration.
	CertFile, KeyFile string
	// DNSNames of the self-signed certificate (default
	// ServiceDNSNames("istio-system")).
	DNSNames []string
	Logger   *slog.Logger
}

// ServiceDNSNames are the names under which the API server may call a
// webhook served by the control plane in namespace: its Service, "istiod"
// as Istio names it (so Istio's MutatingWebhookConfiguration works as is)
// or "straitd", short, namespaced and with ".svc", plus localhost.
func ServiceDNSNames(namespace string) []string {
	var names []string
	for _, svc := range []string{"istiod", "straitd"} {
		names = append(names, svc, svc+"."+namespace, svc+"."+namespace+".svc")
	}
	return append(names, "localhost")
}

// Server serves the injection webhook at /inject and /inject/ over HTTPS.
type Server struct {
	srv      *http.Server
	addr     string
	caBundle []byte
	log      *slog.Logger
}

// NewServer returns a Server for handler (normally NewWebhookHandler's).
func NewServer(handler http.Handler, opts ServerOptions) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = DefaultWebhookAddr
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{addr: opts.Addr, log: opts.Logger.With("component", "inject-server")}
	var getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	switch {
	case opts.CertFile != "" || opts.KeyFile != "":
		if opts.CertFile == "" || opts.KeyFile == "" {
			return nil, errors.New("webhook server: both a certificate file and a key file are needed")
		}
		r := &certReloader{certFile: opts.CertFile, keyFile: opts.KeyFile, log: s.log}
		if err := r.reload(); err != nil {
			return nil, err
		}
		getCert = r.get
		ca, err := os.ReadFile(opts.CertFile)
		if err != nil {
			return nil, fmt.Errorf("webhook server: read the CA bundle from the certificate file: %w", err)
		}
		s.caBundle = ca
	default:
		names := opts.DNSNames
		if len(names) == 0 {
			names = ServiceDNSNames("istio-system")
		}
		pair, err := SelfSigned(names, time.Now())
		if err != nil {
			return nil, err
		}
		cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
		if err != nil {
			return nil, err
		}
		s.caBundle = pair.CAPEM
		getCert = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	mux := http.NewServeMux()
	mux.Handle("/inject", handler)
	mux.Handle("/inject/", handler)
	s.srv = &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: getCert},
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// CABundle is the PEM that API servers must trust to call the webhook:
// the self-signed CA, or the certificate file as it was at start.
func (s *Server) CABundle() []byte { return bytes.Clone(s.caBundle) }

// ListenAndServe listens on the configured address and serves until ctx
// ends, then shuts down gracefully.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("webhook server: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln (TLS is added here) until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.log.Info("serving sidecar injection", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(tls.NewListener(ln, s.srv.TLSConfig)) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		err := s.srv.Shutdown(sctx)
		_ = <-errc // Serve's http.ErrServerClosed
		return err
	}
}

// certReloader serves a certificate from files, re-reading them when
// their modification time or size changes (checked at most once a
// second). A pair that fails to load keeps the previous one.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu        sync.Mutex // guards the fields below
	cert      *tls.Certificate
	stamp     string
	lastCheck time.Time
}

func fileStamp(paths ...string) (string, error) {
	var b bytes.Buffer
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s:%d:%d;", p, fi.ModTime().UnixNano(), fi.Size())
	}
	return b.String(), nil
}

func (r *certReloader) reload() error {
	stamp, err := fileStamp(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("webhook certificate: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("webhook certificate: %w", err)
	}
	r.mu.Lock()
	r.cert, r.stamp = &cert, stamp
	r.mu.Unlock()
	return nil
}

func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	check := time.Since(r.lastCheck) >= time.Second
	if check {
		r.lastCheck = time.Now()
	}
	stamp := r.stamp
	r.mu.Unlock()
	if check {
		if now, err := fileStamp(r.certFile, r.keyFile); err == nil && now != stamp {
			if err := r.reload(); err != nil {
				r.log.Warn("keeping the previous webhook certificate", "error", err)
			} else {
				r.log.Info("webhook certificate reloaded", "file", r.certFile)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cert, nil
}

// CertPair is a serving certificate, its key and the CA that signed it,
// all PEM.
type CertPair struct {
	CertPEM, KeyPEM, CAPEM []byte
}

// SelfSigned makes a CA and a serving certificate for dnsNames signed by
// it, valid for a year from now.
func SelfSigned(dnsNames []string, now time.Time) (*CertPair, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial := func() *big.Int {
		n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
		return n
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"strait"}, CommonName: "strait injection webhook CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	cn := "strait-webhook"
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	}
	leaf := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{Organization: []string{"strait"}, CommonName: cn},
		DNSNames:     dnsNames,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &CertPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		CAPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
	}, nil
}
