package server

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/straitmesh/strait/internal/ca"
	"github.com/straitmesh/strait/internal/ca/token"
)

// FileTokens authenticates tokens issued by `straitctl token create` with
// straitd's token key.
type FileTokens struct {
	Key token.Key
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Name implements Authenticator.
func (FileTokens) Name() string { return "file token" }

// Accepts implements Authenticator.
func (FileTokens) Accepts(tok string) bool { return strings.HasPrefix(tok, token.Prefix) }

// Authenticate implements Authenticator.
func (f FileTokens) Authenticate(_ context.Context, tok string) (Caller, error) {
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	c, err := f.Key.Verify(tok, now())
	if err != nil {
		return Caller{}, err
	}
	return Caller{Namespace: c.Namespace, ServiceAccount: c.ServiceAccount}, nil
}

// KubeTokens authenticates Kubernetes service-account tokens with a
// TokenReview against the API server, for the audience istio-ca, as
// Istio's KubeJWTAuthenticator does (security/pkg/server/ca/authenticate/kubeauth).
type KubeTokens struct {
	Client kubernetes.Interface
	// Audience defaults to istio-ca.
	Audience string
}

// Name implements Authenticator.
func (KubeTokens) Name() string { return "kubernetes" }

// Accepts implements Authenticator: anything that is not a file token.
func (KubeTokens) Accepts(tok string) bool { return !strings.HasPrefix(tok, token.Prefix) }

const saUserPrefix = "system:serviceaccount:"

// Authenticate implements Authenticator.
func (k KubeTokens) Authenticate(ctx context.Context, tok string) (Caller, error) {
	aud := k.Audience
	if aud == "" {
		aud = token.Audience
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tr, err := k.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: tok, Audiences: []string{aud}},
	}, metav1.CreateOptions{})
	if err != nil {
		return Caller{}, fmt.Errorf("token review: %w", err)
	}
	st := tr.Status
	if !st.Authenticated {
		msg := st.Error
		if msg == "" {
			msg = "not authenticated"
		}
		return Caller{}, fmt.Errorf("token review: %s (want a service-account token for audience %q)", msg, aud)
	}
	if !slices.Contains(st.Audiences, aud) {
		return Caller{}, fmt.Errorf("token review: the token's audiences %v do not include %q", st.Audiences, aud)
	}
	rest, ok := strings.CutPrefix(st.User.Username, saUserPrefix)
	ns, sa, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || ns == "" || sa == "" {
		return Caller{}, errors.New("token review: user " + st.User.Username + " is not a service account (system:serviceaccount:<namespace>:<name>)")
	}
	return Caller{Namespace: ns, ServiceAccount: sa}, nil
}

var (
	_ Authenticator = FileTokens{}
	_ Authenticator = KubeTokens{}
)

// ClientCerts authenticates a caller by the workload certificate it
// presents in the TLS handshake, as Istio's ClientCertAuthenticator
// (security/pkg/server/ca/authenticate/cert_authenticator.go) does: the
// chain must verify, for client authentication, against the CA's current
// trust bundle, and the leaf's only URI SAN must be a SPIFFE ID of the
// CA's trust domain; the caller is that identity. The TLS handshake has
// already proved that the caller holds the certificate's key.
//
// A workload that once held a certificate can so renew it for as long as
// it keeps renewing, without its token: revoking a token does not cut off
// an agent that already has a certificate (rotating the CA does).
type ClientCerts struct {
	// Roots returns the trust bundle (ca.CA.Roots).
	Roots func() []*x509.Certificate
	// TrustDomain returns the trust domain whose identities are accepted
	// (ca.CA.TrustDomain).
	TrustDomain func() string
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Authenticate checks chain, the leaf first.
func (c *ClientCerts) Authenticate(chain []*x509.Certificate) (Caller, error) {
	if len(chain) == 0 {
		return Caller{}, errors.New("no certificate")
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	roots := x509.NewCertPool()
	for _, r := range c.Roots() {
		roots.AddCert(r)
	}
	inter := x509.NewCertPool()
	for _, ic := range chain[1:] {
		inter.AddCert(ic)
	}
	leaf := chain[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return Caller{}, fmt.Errorf("does not verify against the mesh's trust bundle: %w", err)
	}
	if leaf.IsCA || len(leaf.URIs) != 1 || len(leaf.DNSNames) > 0 || len(leaf.IPAddresses) > 0 || len(leaf.EmailAddresses) > 0 {
		return Caller{}, fmt.Errorf("not a workload certificate (want one SPIFFE ID as its only SAN; it has URIs %v, DNS names %v, IPs %v)",
			leaf.URIs, leaf.DNSNames, leaf.IPAddresses)
	}
	id, err := ca.ParseIdentity(leaf.URIs[0].String())
	if err != nil {
		return Caller{}, err
	}
	if td := c.TrustDomain(); id.TrustDomain != td {
		return Caller{}, fmt.Errorf("%s is not of the trust domain %s", id, td)
	}
	return Caller{Namespace: id.Namespace, ServiceAccount: id.ServiceAccount}, nil
}
