package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

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
