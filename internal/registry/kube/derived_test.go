package kube

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

func TestDerivedCache(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo", UID: "svc-uid", ResourceVersion: "1"},
		Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-a", Namespace: "demo", ResourceVersion: "5", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "web-1", Namespace: "demo"}}},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "demo", UID: "pod-uid", ResourceVersion: "7", Labels: map[string]string{"version": "v1"}},
		Status:     corev1.PodStatus{PodIP: "10.1.0.1"},
	}
	pods := func(key string) (*corev1.Pod, bool) {
		if pod != nil && key == "demo/web-1" {
			return pod, true
		}
		return nil, false
	}
	d := newDerivedCache()
	seen := map[types.UID]bool{}
	first := d.serviceEntry(svc, []*discoveryv1.EndpointSlice{slice}, pods, "cluster.local", seen)
	if first == nil || first.ServiceEntry().GetEndpoints()[0].GetLabels()["version"] != "v1" {
		t.Fatalf("first conversion = %v", first)
	}
	if again := d.serviceEntry(svc, []*discoveryv1.EndpointSlice{slice}, pods, "cluster.local", seen); again != first {
		t.Error("nothing changed, but the ServiceEntry was converted again")
	}

	steps := []struct {
		name   string
		change func()
	}{
		{"slice resourceVersion", func() {
			s := *slice
			s.ResourceVersion = "6"
			s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.2"}}}
			slice = &s
		}},
		{"service resourceVersion", func() {
			s := *svc
			s.ResourceVersion = "2"
			svc = &s
		}},
		{"labels of an endpoint's pod", func() {
			slice.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "web-1", Namespace: "demo"}}}
			slice.ResourceVersion = "8"
			_ = d.serviceEntry(svc, []*discoveryv1.EndpointSlice{slice}, pods, "cluster.local", seen)
			p := *pod
			p.ResourceVersion = "9"
			p.Labels = map[string]string{"version": "v2"}
			pod = &p
		}},
		{"endpoint's pod deleted", func() { pod = nil }},
	}
	prev := first
	for _, st := range steps {
		st.change()
		if st.name == "labels of an endpoint's pod" {
			prev = d.services[svc.UID].cfg
		}
		got := d.serviceEntry(svc, []*discoveryv1.EndpointSlice{slice}, pods, "cluster.local", seen)
		if got == prev {
			t.Errorf("%s changed, but the cached ServiceEntry was reused", st.name)
		}
		prev = got
	}
	if got := prev.ServiceEntry().GetEndpoints()[0].GetLabels(); len(got) != 0 {
		t.Errorf("after the pod was deleted, the endpoint still has labels %v", got)
	}

	// Pods: reused while the resourceVersion is the same.
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "demo", UID: "x-uid", ResourceVersion: "1"}, Status: corev1.PodStatus{PodIP: "10.1.0.9"}}
	we := d.workloadEntry(p, seen)
	if d.workloadEntry(p, seen) != we {
		t.Error("unchanged pod converted again")
	}
	p2 := *p
	p2.ResourceVersion = "2"
	p2.Status.PodIP = "10.1.0.10"
	if got := d.workloadEntry(&p2, seen); got == we || got.WorkloadEntry().GetAddress() != "10.1.0.10" {
		t.Errorf("changed pod: got %v", got)
	}

	// Objects not seen in a rebuild are forgotten.
	d.prune(map[types.UID]bool{"x-uid": true})
	if _, ok := d.services[svc.UID]; ok {
		t.Error("prune kept a service that was not seen")
	}
	if _, ok := d.pods["x-uid"]; !ok {
		t.Error("prune dropped a pod that was seen")
	}
}

func TestStripCRDKeepsWhatParseCRDReads(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "virtualservices.networking.istio.io",
			"annotations":   map[string]any{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
			"managedFields": []any{map[string]any{"manager": "kubectl"}}},
		"spec": map[string]any{
			"group": "networking.istio.io",
			"names": map[string]any{"kind": "VirtualService", "plural": "virtualservices"},
			"versions": []any{
				map[string]any{"name": "v1", "served": true, "schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object"}}},
				map[string]any{"name": "v1alpha3", "served": true, "schema": map[string]any{}},
				map[string]any{"name": "v1beta1", "served": false},
			},
		},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": "True"}}},
	}}
	want := parseCRD(u.DeepCopy())
	out, err := stripCRD(u)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*unstructured.Unstructured)
	got := parseCRD(s)
	if got.key() != want.key() || got.plural != want.plural || !got.established || len(got.served) != 2 || got.served[0] != want.served[0] {
		t.Errorf("parseCRD after strip = %+v, want %+v", got, want)
	}
	versions, _, _ := unstructured.NestedSlice(s.Object, "spec", "versions")
	for _, v := range versions {
		if _, ok := v.(map[string]any)["schema"]; ok {
			t.Errorf("version %v still has its schema", v.(map[string]any)["name"])
		}
	}
	if len(s.GetManagedFields()) != 0 || len(s.GetAnnotations()) != 0 {
		t.Error("managed fields or annotations kept")
	}
}

// A pod without locality labels takes its node's; a change of the nodes'
// localities (nodesGen) makes the cached entries stale.
func TestDerivedCacheNodeLocality(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo", UID: "svc-uid", ResourceVersion: "1"},
		Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-a", Namespace: "demo", ResourceVersion: "5", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "web-1", Namespace: "demo"}}},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "demo", UID: "pod-uid", ResourceVersion: "7"},
		Spec:       corev1.PodSpec{NodeName: "n1"},
		Status:     corev1.PodStatus{PodIP: "10.1.0.1"},
	}
	pods := func(key string) (*corev1.Pod, bool) { return pod, key == "demo/web-1" }
	zone := "us/us-a"
	d := newDerivedCache()
	d.nodeLocality = func(name string) string {
		if name == "n1" {
			return zone
		}
		return ""
	}
	check := func(want string) {
		t.Helper()
		seen := map[types.UID]bool{}
		se := d.serviceEntry(svc, []*discoveryv1.EndpointSlice{slice}, pods, "cluster.local", seen)
		we := d.workloadEntry(pod, seen)
		if got := se.ServiceEntry().GetEndpoints()[0].GetLocality(); got != want {
			t.Errorf("endpoint locality %q, want %q", got, want)
		}
		if got := we.WorkloadEntry().GetLocality(); got != want {
			t.Errorf("workload entry locality %q, want %q", got, want)
		}
	}
	check("us/us-a")
	zone = "us/us-b"
	check("us/us-a") // cached: nothing said the node changed
	d.nodesGen++
	check("us/us-b")
}

// Only a change of a node's locality labels pushes and makes the derived
// configs stale.
func TestOnNode(t *testing.T) {
	r := &Registry{derived: newDerivedCache()}
	node := func(rv, zone string, extra map[string]string) *corev1.Node {
		l := map[string]string{"topology.kubernetes.io/region": "us", "topology.kubernetes.io/zone": zone}
		for k, v := range extra {
			l[k] = v
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: rv, Labels: l}}
	}
	for _, c := range []struct {
		name string
		ev   event
		push bool
	}{
		{"add with a locality", event{typ: eventAdd, obj: node("1", "a", nil)}, true},
		{"add without", event{typ: eventAdd, obj: &corev1.Node{}}, false},
		{"other label", event{typ: eventUpdate, old: node("1", "a", nil), obj: node("2", "a", map[string]string{"x": "y"})}, false},
		{"zone changed", event{typ: eventUpdate, old: node("2", "a", nil), obj: node("3", "b", nil)}, true},
		{"same version", event{typ: eventUpdate, old: node("3", "a", nil), obj: node("3", "b", nil)}, false},
		{"delete", event{typ: eventDelete, old: node("3", "b", nil), obj: node("3", "b", nil)}, true},
	} {
		gen := r.derived.nodesGen
		req := r.onNode(context.Background(), c.ev)
		if (req != nil) != c.push || (r.derived.nodesGen != gen) != c.push {
			t.Errorf("%s: push %v, nodesGen %d -> %d; want push %v", c.name, req != nil, gen, r.derived.nodesGen, c.push)
		}
	}
}
