package ca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"sync"
	"time"
)

// ServingCert keeps straitd's own serving certificate (for the TLS port
// 15012) issued by the CA, and re-issues it when 80% of its lifetime has
// passed, so a long-running straitd never serves an expired certificate,
// and after every CA reload, so that once a root rotation switches the
// signing CA, agents that trust only the new root can connect at once.
// GetCertificate is safe for concurrent use.
type ServingCert struct {
	ca   *CA
	opts ServingOptions

	mu      sync.Mutex // guards cert, renewAt and caChanged
	cert    *tls.Certificate
	renewAt time.Time
	// caChanged is the CA's Changed channel taken before cert was issued:
	// closed means the CA reloaded since, and cert may be under an old
	// signing CA.
	caChanged <-chan struct{}
}

// NewServingCert issues the first certificate now, so a bad name fails at
// start-up rather than at the first handshake.
func NewServingCert(c *CA, opts ServingOptions) (*ServingCert, error) {
	s := &ServingCert{ca: c, opts: opts}
	if _, err := s.get(); err != nil {
		return nil, err
	}
	return s, nil
}

// GetCertificate is a tls.Config.GetCertificate.
func (s *ServingCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.get() }

func (s *ServingCert) get() (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.ca.opts.Now()
	if s.cert != nil && now.Before(s.renewAt) && !closed(s.caChanged) {
		return s.cert, nil
	}
	changed := s.ca.Changed()
	cert, err := s.ca.IssueServing(s.opts)
	if err != nil {
		if s.cert != nil && now.Before(s.cert.Leaf.NotAfter) {
			s.ca.log.Warn("serving certificate not renewed; keeping the current one", "error", err)
			return s.cert, nil
		}
		return nil, err
	}
	life := cert.Leaf.NotAfter.Sub(now)
	s.cert, s.renewAt, s.caChanged = cert, now.Add(life*4/5), changed
	return cert, nil
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// ServingOptions describe a serving certificate for straitd itself.
type ServingOptions struct {
	DNSNames []string
	IPs      []net.IP
	TTL      time.Duration
}

// IssueServing makes a key and a server certificate for straitd's own TLS
// port (15012), signed by this CA, with the chain up to (not including)
// the root.
func (c *CA) IssueServing(o ServingOptions) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ca: serving key: %w", err)
	}
	kc := c.current()
	now := c.opts.Now()
	ttl := o.TTL
	if ttl <= 0 {
		ttl = c.opts.DefaultTTL
	}
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{Organization: []string{c.opts.TrustDomain}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(ttl),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              o.DNSNames,
		IPAddresses:           o.IPs,
	}
	if tmpl.NotAfter.After(kc.cert.NotAfter) {
		tmpl.NotAfter = kc.cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, kc.cert, key.Public(), kc.signer)
	if err != nil {
		return nil, fmt.Errorf("ca: sign serving certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("ca: parse serving certificate: %w", err)
	}
	out := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	for _, ic := range kc.chain {
		if !isSelfSigned(ic) {
			out.Certificate = append(out.Certificate, ic.Raw)
		}
	}
	if len(kc.chain) == 0 && !isSelfSigned(kc.cert) {
		out.Certificate = append(out.Certificate, kc.cert.Raw)
	}
	return out, nil
}
