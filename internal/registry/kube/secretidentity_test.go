package kube

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/straitmesh/strait/internal/proxypush"
)

// podWithSA creates a running pod with IP ip and service account sa.
func (f *fixture) podWithSA(name, ip, sa string) {
	f.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec:       corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	created, err := f.kube.CoreV1().Pods(f.ns).Create(f.ctx, pod, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatalf("create pod: %v", err)
	}
	created.Status.PodIP, created.Status.PodIPs, created.Status.Phase = ip, []corev1.PodIP{{IP: ip}}, corev1.PodRunning
	if _, err := f.kube.CoreV1().Pods(f.ns).UpdateStatus(f.ctx, created, metav1.UpdateOptions{}); err != nil {
		f.t.Fatalf("set pod IP: %v", err)
	}
}

// TestSecretAuthorizationByIdentity: on the real API server (RBAC), a
// gateway whose xDS stream authenticated as its pod's service account
// gets its namespace's Secrets though its connection comes from another
// address (kube-proxy's --masquerade-all rewrites it to the node's), as
// istiod authorizes SDS by the verified identity; without an identity the
// source address must still be the pod's. An identity of another service
// account or namespace than the pod's, a sidecar, and a gateway whose
// service account may not list the Secrets get none.
func TestSecretAuthorizationByIdentity(t *testing.T) {
	env := sharedEnv(t)
	f := newFixture(t, env, "kgwauthn")
	p := startPlane(t, env.Config, Options{})
	f.podWithSA("gw-istio-0", "10.200.11.1", "gw-istio")
	f.podWithSA("rogue-0", "10.200.11.2", "app")
	f.podWithSA("app-0", "10.200.11.3", "app")
	rbac := f.kube.RbacV1()
	if _, err := rbac.Roles(f.ns).Create(f.ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "gw-istio"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "watch", "list"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(f.ns).Create(f.ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "gw-istio"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "gw-istio"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "gw-istio", Namespace: f.ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		_, err := p.reg.serviceAccountOf(&proxypush.Proxy{Namespace: f.ns, PodName: "app-0", IP: "10.200.11.3"})
		return err == nil
	}, "the pods in the registry's cache")
	const nodeIP = "10.99.0.1" // the masqueraded source
	proxy := func(typ proxypush.NodeType, ip, pod string, id *proxypush.Identity) *proxypush.Proxy {
		px, err := proxypush.ParseNodeID(proxypush.TypedNodeID(typ, ip, pod, f.ns, ""))
		if err != nil {
			t.Fatal(err)
		}
		px.PeerIP, px.Identity = netip.MustParseAddr(nodeIP), id
		return px
	}
	// The API server's RBAC authorizer learns of the new RoleBinding
	// from its own informer: until then it denies (a CI run saw it).
	// The gateway is allowed once it has, and not before.
	waitFor(t, func() bool {
		return p.reg.authorizeSecrets(proxy(proxypush.Router, "10.200.11.1", "gw-istio-0", &proxypush.Identity{Namespace: f.ns, ServiceAccount: "gw-istio"})) == nil
	}, "the RoleBinding in the API server's authorizer")
	for _, tc := range []struct {
		name  string
		proxy *proxypush.Proxy
		want  string // "" allowed
	}{
		{"gateway authenticated as its service account", proxy(proxypush.Router, "10.200.11.1", "gw-istio-0", &proxypush.Identity{Namespace: f.ns, ServiceAccount: "gw-istio"}), ""},
		{"gateway not authenticated, masqueraded", proxy(proxypush.Router, "10.200.11.1", "gw-istio-0", nil), "connects from " + nodeIP},
		{"another service account's identity", proxy(proxypush.Router, "10.200.11.1", "gw-istio-0", &proxypush.Identity{Namespace: f.ns, ServiceAccount: "app"}), "authenticated as service account kgwauthn/app"},
		{"another namespace's identity", proxy(proxypush.Router, "10.200.11.1", "gw-istio-0", &proxypush.Identity{Namespace: "other", ServiceAccount: "gw-istio"}), "authenticated as service account other/gw-istio"},
		{"sidecar of another service account", proxy(proxypush.SidecarProxy, "10.200.11.3", "app-0", &proxypush.Identity{Namespace: f.ns, ServiceAccount: "app"}), "is a sidecar"},
		{"gateway whose service account may not list Secrets", proxy(proxypush.Router, "10.200.11.2", "rogue-0", &proxypush.Identity{Namespace: f.ns, ServiceAccount: "app"}), "may not list the Secrets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := p.reg.authorizeSecrets(tc.proxy)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
