package sds

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/url"
	"strconv"
	"time"
)

// Signer asks the CA for a certificate (caclient.Client).
type Signer interface {
	Sign(ctx context.Context, csrPEM []byte, ttl time.Duration) ([]string, error)
}

// RotatorOptions configure a Rotator.
type RotatorOptions struct {
	Signer Signer
	// SPIFFEID is the identity requested, spiffe://TD/ns/NS/sa/SA.
	SPIFFEID string
	// TTL is the lifetime requested (the CA may grant less).
	TTL   time.Duration
	Store *Store
	// RenewRatio is the fraction of the lifetime after which the
	// certificate is renewed (default 0.8), RenewJitter the most it is
	// moved either way at random (default 0.05), so a fleet started
	// together does not renew together.
	RenewRatio, RenewJitter float64
	// RetryBase and RetryMax bound the wait between failed requests
	// (defaults 200ms and 30s).
	RetryBase, RetryMax time.Duration
	// Rand returns a number in [0, 1) (default math/rand/v2).
	Rand   func() float64
	Logger *slog.Logger
}

// Rotator keeps a valid certificate in its Store: it generates an ECDSA
// P-256 key (which never leaves the process), sends a CSR, stores the
// answer, and renews at ~80% of the lifetime with a new key.
type Rotator struct {
	opts    RotatorOptions
	log     *slog.Logger
	uri     *url.URL
	version int // touched only by Run's goroutine
}

// NewRotator checks the options.
func NewRotator(opts RotatorOptions) (*Rotator, error) {
	if opts.Signer == nil || opts.Store == nil {
		return nil, errors.New("sds rotator: Signer and Store are required")
	}
	u, err := url.Parse(opts.SPIFFEID)
	if err != nil || u.Scheme != "spiffe" {
		return nil, fmt.Errorf("sds rotator: %q is not a SPIFFE ID", opts.SPIFFEID)
	}
	if opts.TTL <= 0 {
		return nil, errors.New("sds rotator: TTL must be positive")
	}
	if opts.RenewRatio <= 0 || opts.RenewRatio >= 1 {
		opts.RenewRatio = 0.8
	}
	if opts.RenewJitter <= 0 {
		opts.RenewJitter = 0.05
	}
	opts.RenewJitter = min(opts.RenewJitter, opts.RenewRatio, 1-opts.RenewRatio)
	if opts.RetryBase <= 0 {
		opts.RetryBase = 200 * time.Millisecond
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = 30 * time.Second
	}
	if opts.Rand == nil {
		opts.Rand = mrand.Float64
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Rotator{opts: opts, log: opts.Logger.With("component", "sds-rotator"), uri: u}, nil
}

// Run obtains the first certificate and renews it until ctx is done.
// Failures are retried with backoff (the current certificate stays in use
// meanwhile); Run returns only when ctx is done.
func (r *Rotator) Run(ctx context.Context) error {
	for {
		sec := r.obtain(ctx)
		if sec == nil {
			return nil // ctx done
		}
		r.opts.Store.Set(sec)
		renewIn := r.renewAfter(sec)
		r.log.Info("workload certificate issued", "spiffe_id", r.opts.SPIFFEID, "serial", sec.Leaf.SerialNumber.Text(16),
			"not_after", sec.Leaf.NotAfter.UTC(), "renew_in", renewIn.Round(time.Millisecond), "roots", len(sec.Roots))
		t := time.NewTimer(renewIn)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// renewAfter is how long after issuance to renew: RenewRatio ± RenewJitter
// of the lifetime left at issuance.
func (r *Rotator) renewAfter(sec *Secrets) time.Duration {
	life := sec.Leaf.NotAfter.Sub(sec.IssuedAt)
	ratio := r.opts.RenewRatio + (2*r.opts.Rand()-1)*r.opts.RenewJitter
	return time.Duration(float64(life) * ratio)
}

// obtain requests certificates until one arrives or ctx is done (nil).
func (r *Rotator) obtain(ctx context.Context) *Secrets {
	wait := r.opts.RetryBase
	for {
		sec, err := r.request(ctx)
		if err == nil {
			return sec
		}
		if ctx.Err() != nil {
			return nil
		}
		r.log.Warn("workload certificate request failed; retrying", "spiffe_id", r.opts.SPIFFEID, "retry_in", wait, "error", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		wait = min(wait*2, r.opts.RetryMax)
	}
}

func (r *Rotator) request(ctx context.Context) (*Secrets, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{r.uri}}, key)
	if err != nil {
		return nil, fmt.Errorf("create CSR: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	chain, err := r.opts.Signer.Sign(rctx, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), r.opts.TTL)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	r.version++
	sec, err := newSecrets(strconv.Itoa(r.version), chain, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), time.Now())
	if err != nil {
		return nil, err
	}
	if len(sec.Leaf.URIs) != 1 || sec.Leaf.URIs[0].String() != r.opts.SPIFFEID {
		return nil, fmt.Errorf("the CA issued a certificate for %v, not %s", sec.Leaf.URIs, r.opts.SPIFFEID)
	}
	if !publicKeyMatches(sec.Leaf, key) {
		return nil, errors.New("the issued certificate is not for the key sent")
	}
	return sec, nil
}

func publicKeyMatches(c *x509.Certificate, key *ecdsa.PrivateKey) bool {
	pub, ok := c.PublicKey.(*ecdsa.PublicKey)
	return ok && pub.Equal(&key.PublicKey)
}
