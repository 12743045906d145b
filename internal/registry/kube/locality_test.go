package kube

import (
	"fmt"
	"testing"
	"time"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestNodeLocality: pods without locality labels take their node's; the
// client's sidecar gets its own node's zone at priority 0 (a
// DestinationRule with outlier detection, the mesh's default
// localityLbSetting); relabelling a node moves its pods' endpoints.
func TestNodeLocality(t *testing.T) {
	env := sharedEnv(t)
	f := newFixture(t, env, "locality")
	nodes := f.kube.CoreV1().Nodes()
	for name, zone := range map[string]string{"locality-a": "zone-a", "locality-b": "zone-b"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"topology.kubernetes.io/region": "us-east", "topology.kubernetes.io/zone": zone}}}
		if _, err := nodes.Create(f.ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nodes.Delete(f.ctx, name, metav1.DeleteOptions{}) })
	}
	pod := func(name, ip, node string) string {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: map[string]string{"app": name}},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app"}}},
		}
		created, err := f.kube.CoreV1().Pods(f.ns).Create(f.ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.PodIP, created.Status.PodIPs, created.Status.Phase = ip, []corev1.PodIP{{IP: ip}}, corev1.PodRunning
		if _, err := f.kube.CoreV1().Pods(f.ns).UpdateStatus(f.ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return proxypush.NodeID(ip, name, f.ns, "")
	}
	client := pod("client", "10.200.9.1", "locality-a")
	pod("web-a", "10.200.9.2", "locality-a")
	pod("web-b", "10.200.9.3", "locality-b")
	f.service("web", corev1.ServicePort{Name: "http", Port: 80})
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Namespace: f.ns, Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
	}
	for _, e := range []struct{ ip, pod string }{{"10.200.9.2", "web-a"}, {"10.200.9.3", "web-b"}} {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: e.pod, Namespace: f.ns}})
	}
	if _, err := f.kube.DiscoveryV1().EndpointSlices(f.ns).Create(f.ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dr := &networkingv1.DestinationRule{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}}
	dr.Spec.Host = "web"
	dr.Spec.TrafficPolicy = &networkingapi.TrafficPolicy{OutlierDetection: &networkingapi.OutlierDetection{MaxEjectionPercent: 50}}
	if _, err := f.istio.NetworkingV1().DestinationRules(f.ns).Create(f.ctx, dr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	p := startPlane(t, env.Config, Options{})
	c := dialADS(t, p.addr, client)
	c.subscribe(t, xdsapi.ClusterType)
	clusterName := gen.OutboundClusterName(80, "", f.host("web"))
	c.subscribe(t, xdsapi.EndpointType, clusterName)
	// priorities is "IP@priority" for each endpoint of the last EDS.
	priorities := func() map[string]uint32 {
		out := map[string]uint32{}
		r := c.latestOf(xdsapi.EndpointType)
		if r == nil {
			return out
		}
		for _, a := range r.Resources {
			var cla endpoint.ClusterLoadAssignment
			if a.UnmarshalTo(&cla) != nil || cla.ClusterName != clusterName {
				continue
			}
			for _, l := range cla.Endpoints {
				for _, e := range l.LbEndpoints {
					out[e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()] = l.GetPriority()
				}
			}
		}
		return out
	}
	want := func(a, b uint32) func() bool {
		return func() bool {
			got := priorities()
			pa, okA := got["10.200.9.2"]
			pb, okB := got["10.200.9.3"]
			return okA && okB && pa == a && pb == b
		}
	}
	c.wait(t, "zone-a at priority 0, zone-b at 1", 10*time.Second, want(0, 1))
	if w := p.reg.Snapshot().WorkloadByIP("10.200.9.3"); w == nil || w.Locality != "us-east/zone-b" {
		t.Errorf("web-b's workload: %+v, want locality us-east/zone-b from its node", w)
	}

	// Node locality-b moves to zone-a: web-b joins priority 0.
	n, err := nodes.Get(f.ctx, "locality-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels["topology.kubernetes.io/zone"] = "zone-a"
	if _, err := nodes.Update(f.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.wait(t, "both at priority 0 after the node's relabel", 10*time.Second, want(0, 0))
	if got := fmt.Sprint(priorities()); got == "" {
		t.Fatal("no EDS")
	}
}
