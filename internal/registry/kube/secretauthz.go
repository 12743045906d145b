package kube

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
)

// Who gets a Secret. A Gateway's credential holds a private key, so
// straitd serves it only to a proxy that is:
//   - a gateway (proxy router), of the Secret's namespace (parseCredentialResource);
//   - known to be the pod its node id names: the node id is what a proxy
//     says of itself. When the xDS stream authenticated (a service
//     account token over TLS, as Istio's istiod authorizes SDS by the
//     verified identity: proxypush.Proxy.Identity), the identity's
//     namespace and service account must be the pod's. Otherwise the
//     connection must come from the address its node id names, which
//     ResolveProxy found to be its pod's (or its WorkloadEntry's); a
//     connection whose source address is rewritten on the way (kube-proxy
//     with --masquerade-all, a NAT) then gets no Secret;
//   - running as a service account that may list the Secrets of its
//     namespace, as istiod asks before it serves a credential
//     (pilot/pkg/credentials/kube CredentialsController.Authorize: a
//     SubjectAccessReview of verb list on secrets for
//     system:serviceaccount:NS:SA). Istio's gateway chart grants its
//     gateways that Role; Strait's chart grants it to the ingress gateway.
// The review's answer is kept for secretReviewTTL, as istiod caches it,
// so a gateway's reconnections and pushes do not each ask the API server.

// secretReviewTTL is how long a review's answer is kept.
const secretReviewTTL = time.Minute

// secretReviewTimeout bounds one SubjectAccessReview.
const secretReviewTimeout = 5 * time.Second

// secretReviewer asks the API server whether a service account may list
// its namespace's Secrets; safe for concurrent use.
type secretReviewer struct {
	sar authorizationv1client.SubjectAccessReviewInterface
	now func() time.Time

	mu      sync.Mutex
	answers map[string]reviewAnswer // by user name
}

type reviewAnswer struct {
	err error // nil: allowed
	at  time.Time
}

func newSecretReviewer(sar authorizationv1client.SubjectAccessReviewInterface) *secretReviewer {
	return &secretReviewer{sar: sar, now: time.Now, answers: map[string]reviewAnswer{}}
}

// review returns nil when service account sa of namespace ns may list
// the Secrets of ns, else why not.
func (v *secretReviewer) review(ns, sa string) error {
	user := "system:serviceaccount:" + ns + ":" + sa
	now := v.now()
	v.mu.Lock()
	a, ok := v.answers[user]
	v.mu.Unlock()
	if ok && now.Sub(a.at) < secretReviewTTL {
		return a.err
	}
	err := v.ask(ns, user)
	v.mu.Lock()
	for u, old := range v.answers { // drop the stale ones, so the map stays small
		if now.Sub(old.at) >= secretReviewTTL {
			delete(v.answers, u)
		}
	}
	v.answers[user] = reviewAnswer{err: err, at: now}
	v.mu.Unlock()
	return err
}

func (v *secretReviewer) ask(ns, user string) error {
	ctx, cancel := context.WithTimeout(context.Background(), secretReviewTimeout)
	defer cancel()
	resp, err := v.sar.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               user,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "secrets"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("asking the API server whether %s may list the Secrets of %s (SubjectAccessReview): %w", user, ns, err)
	}
	if !resp.Status.Allowed {
		reason := resp.Status.Reason
		if reason == "" {
			reason = "no RBAC rule allows it"
		}
		return fmt.Errorf("%s may not list the Secrets of namespace %s (%s): grant it a Role with get, watch and list on secrets, as Istio's gateway chart does", user, ns, reason)
	}
	return nil
}

// authorizeSecrets decides whether proxy may have its namespace's
// Secrets (see the top of this file).
func (r *Registry) authorizeSecrets(proxy *proxypush.Proxy) error {
	if proxy != nil && proxy.Identity != nil {
		if err := checkSecretGateway(proxy); err != nil {
			return err
		}
		sa, err := r.serviceAccountOf(proxy)
		if err != nil {
			return err
		}
		if err := checkSecretIdentity(proxy, sa); err != nil {
			return err
		}
		return r.reviewer.review(proxy.Namespace, sa)
	}
	if err := checkSecretPeer(proxy); err != nil {
		return err
	}
	sa, err := r.serviceAccountOf(proxy)
	if err != nil {
		return err
	}
	return r.reviewer.review(proxy.Namespace, sa)
}

// checkSecretIdentity refuses a proxy whose authenticated identity is not
// the service account sa of its pod's namespace.
func checkSecretIdentity(proxy *proxypush.Proxy, sa string) error {
	id := proxy.Identity
	if id.Namespace != proxy.Namespace || id.ServiceAccount != sa {
		return fmt.Errorf("proxy %s authenticated as service account %s/%s, but its pod %s/%s runs as %s/%s: Secrets go only to the gateway's own service account",
			proxy.ID, id.Namespace, id.ServiceAccount, proxy.Namespace, proxy.PodName, proxy.Namespace, sa)
	}
	return nil
}

// checkSecretGateway refuses a proxy that is no gateway.
func checkSecretGateway(proxy *proxypush.Proxy) error {
	if proxy == nil {
		return errors.New("no proxy")
	}
	if proxy.Type != proxypush.Router {
		return fmt.Errorf("proxy %s is a %s: Secrets (a Gateway's credentialName) are served only to gateways (proxy router) of the Secret's namespace", proxy.ID, proxy.Type)
	}
	return nil
}

// checkSecretPeer refuses a proxy that is no gateway, or whose connection
// does not come from the IP of its node id.
func checkSecretPeer(proxy *proxypush.Proxy) error {
	if err := checkSecretGateway(proxy); err != nil {
		return err
	}
	ip, err := netip.ParseAddr(proxy.IP)
	if err != nil {
		return fmt.Errorf("proxy %s: node id IP %q: %w", proxy.ID, proxy.IP, err)
	}
	if !proxy.PeerIP.IsValid() || proxy.PeerIP != ip.Unmap() {
		return fmt.Errorf("proxy %s connects from %v, not from its node id's IP %s: Secrets go only to a gateway connected from its own pod's address", proxy.ID, proxy.PeerIP, proxy.IP)
	}
	return nil
}

// serviceAccountOf is the service account proxy runs as: its pod's (the
// namespace's "default" when the pod names none), or its WorkloadEntry's.
func (r *Registry) serviceAccountOf(proxy *proxypush.Proxy) (string, error) {
	if obj, ok, _ := r.pods.GetIndexer().GetByKey(proxy.Namespace + "/" + proxy.PodName); ok {
		pod := obj.(*corev1.Pod)
		if !podHasIP(pod, proxy.IP) {
			return "", fmt.Errorf("proxy %s: pod %s/%s does not have IP %s", proxy.ID, pod.Namespace, pod.Name, proxy.IP)
		}
		if pod.Spec.ServiceAccountName == "" {
			return "default", nil
		}
		return pod.Spec.ServiceAccountName, nil
	}
	if w := r.Snapshot().WorkloadByIP(proxy.IP); w != nil && w.Namespace == proxy.Namespace && !isPodWorkload(w) {
		if w.ServiceAccount == "" {
			return "", fmt.Errorf("proxy %s: WorkloadEntry %s/%s names no serviceAccount, and Secrets go only to a service account that may list them", proxy.ID, w.Namespace, w.Name)
		}
		return w.ServiceAccount, nil
	}
	return "", fmt.Errorf("proxy %s: no pod %s/%s and no WorkloadEntry of namespace %s with IP %s: its service account is unknown", proxy.ID, proxy.Namespace, proxy.PodName, proxy.Namespace, proxy.IP)
}

func podHasIP(pod *corev1.Pod, ip string) bool {
	ips, _ := indexPodIPs(pod)
	return slices.Contains(ips, ip)
}

// isPodWorkload reports whether w was made from a pod rather than a
// WorkloadEntry (ResolveProxy's podPrefix).
func isPodWorkload(w *mesh.Workload) bool { return strings.HasPrefix(w.Name, podPrefix) }
