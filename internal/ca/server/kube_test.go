package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/straitmesh/strait/internal/kubeapiserver"
)

// TestCreateCertificateKubeTokens authenticates callers with TokenReviews
// against a real kube-apiserver: a service-account token for audience
// istio-ca gets a certificate for its own identity, and is refused one for
// another service account; a token for another audience, a deleted
// service account's token and garbage are refused with the API server's
// reason.
func TestCreateCertificateKubeTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	env := kubeapiserver.Start(t, kubeapiserver.Options{NoIstioCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kc := env.Client
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, sa := range []string{"client", "gone"} {
		if _, err := kc.CoreV1().ServiceAccounts("demo").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f := start(t, KubeTokens{Client: kc})

	clientTok := requestToken(ctx, t, kc, "client", "istio-ca")
	const id = "spiffe://cluster.local/ns/demo/sa/client"
	resp, err := call(ctx, f.client, clientTok, csrFor(t, id), 0, nil)
	if err != nil {
		t.Fatalf("service-account token for istio-ca: %v", err)
	}
	if len(resp.CertChain) != 2 {
		t.Fatalf("chain of %d", len(resp.CertChain))
	}
	wantCode(t, "CSR for another service account", errOf(call(ctx, f.client, clientTok, csrFor(t, "spiffe://cluster.local/ns/demo/sa/gone"), 0, nil)),
		codes.PermissionDenied, "but the caller is "+id)
	wantCode(t, "token for another audience", errOf(call(ctx, f.client, requestToken(ctx, t, kc, "client", "vault"), csrFor(t, id), 0, nil)),
		codes.Unauthenticated, "kubernetes: token review:")
	goneTok := requestToken(ctx, t, kc, "gone", "istio-ca")
	if err := kc.CoreV1().ServiceAccounts("demo").Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server's token authenticator reads service accounts from its
	// own informer, which sees the deletion a moment later: wait for its
	// TokenReview to refuse the token before asking the CA.
	waitTokenRefused(ctx, t, kc, goneTok, "istio-ca")
	wantCode(t, "deleted service account", errOf(call(ctx, f.client, goneTok, csrFor(t, "spiffe://cluster.local/ns/demo/sa/gone"), 0, nil)),
		codes.Unauthenticated, "kubernetes: token review:")
	wantCode(t, "garbage", errOf(call(ctx, f.client, "not-a-jwt", csrFor(t, id), 0, nil)), codes.Unauthenticated, "kubernetes: token review:")
	// A file token still works beside the Kubernetes authenticator.
	if _, err := call(ctx, f.client, f.token(t, "demo", "client", time.Hour), csrFor(t, id), 0, nil); err != nil {
		t.Errorf("file token beside kubernetes: %v", err)
	}
}

// waitTokenRefused polls the API server's TokenReview until it no longer
// authenticates tok.
func waitTokenRefused(ctx context.Context, t *testing.T, kc kubernetes.Interface, tok, audience string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		tr, err := kc.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: tok, Audiences: []string{audience}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token review: %v", err)
		}
		if !tr.Status.Authenticated {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the API server still authenticates a deleted service account's token after 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func requestToken(ctx context.Context, t *testing.T, kc kubernetes.Interface, sa, audience string) string {
	t.Helper()
	exp := int64(3600)
	tr, err := kc.CoreV1().ServiceAccounts("demo").CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &exp},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token request for %s: %v", sa, err)
	}
	return tr.Status.Token
}
