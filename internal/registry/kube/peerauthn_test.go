package kube

import (
	"testing"
	"time"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	securityapi "istio.io/api/security/v1beta1"
	typeapi "istio.io/api/type/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestPeerAuthentication: PeerAuthentications created through the API
// (security.istio.io) reach the server's virtualInbound: the namespace's
// STRICT leaves only TLS chains on the pod's port, a workload policy
// (selector) over it brings plaintext back, and deleting both restores
// PERMISSIVE.
func TestPeerAuthentication(t *testing.T) {
	env := sharedEnv(t)
	f := newFixture(t, env, "peerauthn")
	node := f.pod("server", "10.200.8.1", map[string]string{"app": "server", "security.istio.io/tlsMode": "istio"})
	f.service("server", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)})
	f.endpoints("server", "http", 8080, []string{"10.200.8.1"}, nil)
	p := startPlane(t, env.Config, Options{})
	c := dialADS(t, p.addr, node)
	c.subscribe(t, xdsapi.ClusterType)
	c.subscribe(t, xdsapi.ListenerType)

	// transports lists the transport protocols of the chains for 8080.
	transports := func() []string {
		r := c.latestOf(xdsapi.ListenerType)
		if r == nil {
			return nil
		}
		var out []string
		for _, a := range r.Resources {
			var l listener.Listener
			if a.UnmarshalTo(&l) != nil || l.Name != "virtualInbound" {
				continue
			}
			for _, fc := range l.FilterChains {
				if fc.GetFilterChainMatch().GetDestinationPort().GetValue() == 8080 {
					out = append(out, fc.GetFilterChainMatch().GetTransportProtocol())
				}
			}
		}
		return out
	}
	is := func(want ...string) func() bool {
		return func() bool {
			got := transports()
			if len(got) != len(want) {
				return false
			}
			for i := range got {
				if got[i] != want[i] {
					return false
				}
			}
			return true
		}
	}
	c.wait(t, "PERMISSIVE chains on 8080", 10*time.Second, is("tls", "raw_buffer"))

	api := f.istio.SecurityV1().PeerAuthentications(f.ns)
	ns := &securityv1.PeerAuthentication{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: f.ns}}
	ns.Spec.Mtls = &securityapi.PeerAuthentication_MutualTLS{Mode: securityapi.PeerAuthentication_MutualTLS_STRICT}
	if _, err := api.Create(f.ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.wait(t, "STRICT: TLS only on 8080", 10*time.Second, is("tls"))

	wl := &securityv1.PeerAuthentication{ObjectMeta: metav1.ObjectMeta{Name: "server", Namespace: f.ns}}
	wl.Spec.Selector = &typeapi.WorkloadSelector{MatchLabels: map[string]string{"app": "server"}}
	wl.Spec.PortLevelMtls = map[uint32]*securityapi.PeerAuthentication_MutualTLS{8080: {Mode: securityapi.PeerAuthentication_MutualTLS_DISABLE}}
	if _, err := api.Create(f.ctx, wl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.wait(t, "the workload's port-level DISABLE: plaintext only on 8080", 10*time.Second, is("raw_buffer"))

	for _, name := range []string{"default", "server"} {
		if err := api.Delete(f.ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.wait(t, "PERMISSIVE again", 10*time.Second, is("tls", "raw_buffer"))
}

// TestIstioConfigPeerAuthentication: a PeerAuthentication object converts
// with its creationTimestamp (the oldest policy wins among equals).
func TestIstioConfigPeerAuthentication(t *testing.T) {
	created := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "security.istio.io/v1", "kind": "PeerAuthentication",
		"metadata": map[string]any{"name": "default", "namespace": "demo", "creationTimestamp": created.Format(time.RFC3339)},
		"spec":     map[string]any{"mtls": map[string]any{"mode": "STRICT"}},
	}}
	c, err := istioConfig("security.istio.io", "PeerAuthentication", "v1", u)
	if err != nil {
		t.Fatal(err)
	}
	if c == nil || c.PeerAuthentication().GetMtls().GetMode() != securityapi.PeerAuthentication_MutualTLS_STRICT || !c.CreationTime.Equal(created) {
		t.Fatalf("config %+v", c)
	}
}
