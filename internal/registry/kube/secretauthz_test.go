package kube

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/straitmesh/strait/internal/proxypush"
)

// TestCheckSecretPeer: only a gateway connected from its node id's IP
// passes.
func TestCheckSecretPeer(t *testing.T) {
	node := func(id, peer string) *proxypush.Proxy {
		p, err := proxypush.ParseNodeID(id)
		if err != nil {
			t.Fatal(err)
		}
		if peer != "" {
			p.PeerIP = netip.MustParseAddr(peer)
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		proxy *proxypush.Proxy
		want  string // "" passes
	}{
		{"gateway from its IP", node("router~10.0.0.1~gw-1.gw~gw.svc.cluster.local", "10.0.0.1"), ""},
		{"IPv4-mapped peer", node("router~10.0.0.1~gw-1.gw~gw.svc.cluster.local", "::ffff:10.0.0.1"), "connects from ::ffff:10.0.0.1"},
		{"IPv6 gateway", node("router~fd00::1~gw-1.gw~gw.svc.cluster.local", "fd00::1"), ""},
		{"gateway from elsewhere", node("router~10.0.0.1~gw-1.gw~gw.svc.cluster.local", "10.0.0.9"),
			"connects from 10.0.0.9, not from its node id's IP 10.0.0.1"},
		{"peer unknown", node("router~10.0.0.1~gw-1.gw~gw.svc.cluster.local", ""), "connects from invalid IP"},
		{"sidecar", node("sidecar~10.0.0.1~app-1.gw~gw.svc.cluster.local", "10.0.0.1"), "is a sidecar: Secrets"},
		{"bad node IP", node("router~not-an-ip~gw-1.gw~gw.svc.cluster.local", "10.0.0.1"), `node id IP "not-an-ip"`},
		{"no proxy", nil, "no proxy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkSecretPeer(tc.proxy)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestSecretReviewer: the review asks the API server (list secrets in
// the namespace, for the service account's user), refuses with the
// reason and the fix, and keeps each answer for secretReviewTTL.
func TestSecretReviewer(t *testing.T) {
	cs := fake.NewClientset()
	var asked []authorizationv1.SubjectAccessReviewSpec
	allowed := map[string]bool{"system:serviceaccount:gw:ingress": true}
	failing := false
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		asked = append(asked, sar.Spec)
		if failing {
			return true, nil, errors.New("connection refused")
		}
		sar.Status.Allowed = allowed[sar.Spec.User]
		return true, sar, nil
	})
	now := time.Unix(1000, 0)
	v := newSecretReviewer(cs.AuthorizationV1().SubjectAccessReviews())
	v.now = func() time.Time { return now }

	if err := v.review("gw", "ingress"); err != nil {
		t.Fatalf("allowed account refused: %v", err)
	}
	if len(asked) != 1 {
		t.Fatalf("%d reviews, want 1", len(asked))
	}
	ra := asked[0].ResourceAttributes
	if asked[0].User != "system:serviceaccount:gw:ingress" || ra == nil || ra.Namespace != "gw" || ra.Verb != "list" || ra.Resource != "secrets" || ra.Group != "" {
		t.Errorf("review %+v %+v, want user system:serviceaccount:gw:ingress, list secrets in gw", asked[0], ra)
	}
	err := v.review("gw", "app")
	if err == nil || !strings.Contains(err.Error(), "system:serviceaccount:gw:app may not list the Secrets of namespace gw") ||
		!strings.Contains(err.Error(), "grant it a Role with get, watch and list on secrets") {
		t.Errorf("denied account: %v", err)
	}

	// Within the TTL neither answer is asked again, even if it changed.
	allowed["system:serviceaccount:gw:app"] = true
	now = now.Add(secretReviewTTL - time.Second)
	if err := v.review("gw", "ingress"); err != nil {
		t.Errorf("cached allow: %v", err)
	}
	if err := v.review("gw", "app"); err == nil {
		t.Error("cached denial forgotten within the TTL")
	}
	if len(asked) != 2 {
		t.Errorf("%d reviews within the TTL, want 2", len(asked))
	}
	// After it, the API server's new answer counts.
	now = now.Add(2 * time.Second)
	if err := v.review("gw", "app"); err != nil {
		t.Errorf("allowed after the TTL: %v", err)
	}
	// An API server that cannot answer is a refusal that says so.
	failing = true
	if err := v.review("other", "ingress"); err == nil || !strings.Contains(err.Error(), "SubjectAccessReview") ||
		!strings.Contains(err.Error(), "connection refused") {
		t.Errorf("failed review: %v", err)
	}
	if len(v.answers) != 2 {
		t.Errorf("%d cached answers, want the 2 fresh ones (stale ones dropped)", len(v.answers))
	}
}
