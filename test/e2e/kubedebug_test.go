package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/straitmesh/strait/internal/debugapi"
	"github.com/straitmesh/strait/internal/install"
)

// This file is straitd's debug pages as the Kubernetes tests reach them
// from the host: the tokens they need, a page's status, and waits on
// /debug/syncz until the sidecars are synced or a push reached one.

// straitdDebug is where straitd's debug pages are and the token they need
// from outside straitd's pod.
type straitdDebug struct{ addr, token string }

// debugToken is a token of the default service account of straitd's
// namespace for audience istio-ca, as istioctl requests one.
func debugToken(ctx context.Context, t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	return serviceAccountToken(ctx, t, client, install.DefaultNamespace, "istio-ca")
}

// serviceAccountToken is a token of namespace's default service account
// for audience, from the cluster's TokenRequest API.
func serviceAccountToken(ctx context.Context, t *testing.T, client kubernetes.Interface, namespace, audience string) string {
	t.Helper()
	exp := int64(3600)
	var tok string
	// The service-account controller creates a new namespace's default
	// account shortly after the namespace.
	waitEvery(ctx, t, time.Minute, kubePollInterval, "no token for "+namespace+"/default", func() error {
		tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, "default", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &exp},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("token request for %s/default: %w", namespace, err)
		}
		tok = tr.Status.Token
		return nil
	})
	return tok
}

// debugStatus is the status straitd's monitoring port answers for path
// from this host (not loopback to straitd) with token ("": none).
func debugStatus(ctx context.Context, t *testing.T, sd straitdDebug, path, token string) int {
	t.Helper()
	args := []string{"-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5"}
	if token != "" {
		args = append(args, "-H", "Authorization: Bearer "+token)
	}
	out, err := exec.CommandContext(ctx, "curl", append(args, "http://"+sd.addr+path)...).Output()
	if err != nil {
		t.Fatalf("get http://%s%s: %v", sd.addr, path, err)
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("get http://%s%s: status %q: %v", sd.addr, path, out, err)
	}
	return code
}

// syncz reads straitd's /debug/syncz.
func syncz(ctx context.Context, sd straitdDebug) ([]debugapi.SyncStatus, error) {
	out, err := exec.CommandContext(ctx, "curl", "-sf", "--max-time", "5", "-H", "Authorization: Bearer "+sd.token, "http://"+sd.addr+"/debug/syncz").Output()
	if err != nil {
		return nil, fmt.Errorf("get http://%s/debug/syncz: %w", sd.addr, err)
	}
	var st []debugapi.SyncStatus
	if err := json.NewDecoder(bytes.NewReader(out)).Decode(&st); err != nil {
		return nil, err
	}
	return st, nil
}

// waitSynced waits until straitd lists a sidecar for every pod with CDS,
// LDS, EDS and RDS synced.
func waitSynced(ctx context.Context, t *testing.T, addr straitdDebug, pods []corev1.Pod) {
	t.Helper()
	waitEvery(ctx, t, 2*time.Minute, kubePollInterval, "sidecars not SYNCED in straitd's syncz", func() error {
		st, err := syncz(ctx, addr)
		if err != nil {
			return err
		}
		var missing []string
		for _, p := range pods {
			if !proxySynced(st, p.Name) {
				missing = append(missing, p.Name)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%v (syncz %+v)", missing, st)
		}
		return nil
	})
}

func proxySynced(st []debugapi.SyncStatus, pod string) bool {
	for _, s := range st {
		if !strings.HasPrefix(proxyPod(s.ProxyID), pod) {
			continue
		}
		types := map[string]bool{}
		for _, ts := range s.Types {
			types[ts.Type] = ts.Synced
		}
		return types["cds"] && types["lds"] && types["eds"] && types["rds"]
	}
	return false
}

// proxyPod is the pod name of an Istio node id
// (sidecar~IP~POD.NAMESPACE~DOMAIN).
func proxyPod(id string) string {
	parts := strings.Split(id, "~")
	if len(parts) < 3 {
		return id
	}
	return parts[2]
}

// syncOf returns the nonce last sent per type to the pod's sidecar.
func syncOf(ctx context.Context, t *testing.T, addr straitdDebug, pod string) map[string]string {
	t.Helper()
	st, err := syncz(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if strings.HasPrefix(proxyPod(s.ProxyID), pod+".") {
			out := map[string]string{}
			for _, ts := range s.Types {
				out[ts.Type] = ts.Sent
			}
			return out
		}
	}
	t.Fatalf("no sidecar of pod %s in straitd's syncz: %+v", pod, st)
	return nil
}

// waitSyncChange waits until the nonce sent for typ to the pod's sidecar
// differs from before and is ACKed, and returns the nonces then.
func waitSyncChange(ctx context.Context, t *testing.T, addr straitdDebug, pod, typ string, before map[string]string) map[string]string {
	t.Helper()
	waitEvery(ctx, t, time.Minute, kubePollInterval, fmt.Sprintf("the %s nonce of %s's sidecar did not change", typ, pod), func() error {
		if now := syncOf(ctx, t, addr, pod); now[typ] == before[typ] {
			return fmt.Errorf("nonces %v", now)
		}
		return nil
	})
	// Not a wait for a condition but a window to watch: a push of other
	// types that follows (debounced) shows up in it, for the callers that
	// check that none came.
	time.Sleep(2 * time.Second)
	return syncOf(ctx, t, addr, pod)
}

// splitYAML is the DestinationRule with the two subsets and the
// VirtualService splitting between them (weights v1, v2).
const splitYAML = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: server
  namespace: demo
spec:
  host: server.demo.svc.cluster.local
  subsets:
  - name: v1
    labels: {version: v1}
  - name: v2
    labels: {version: v2}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: server
  namespace: demo
spec:
  hosts: [server.demo.svc.cluster.local]
  http:
  - route:
    - destination: {host: server.demo.svc.cluster.local, subset: v1}
      weight: %d
    - destination: {host: server.demo.svc.cluster.local, subset: v2}
      weight: %d
`

func ptr[T any](v T) *T { return &v }
