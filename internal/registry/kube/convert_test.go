package kube

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"

	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/protocol"
	"github.com/straitmesh/strait/internal/proxypush"
)

func ptr[T any](v T) *T { return &v }

func TestServicePortProtocol(t *testing.T) {
	for _, tc := range []struct {
		name, appProtocol string
		proto             corev1.Protocol
		want              protocol.Protocol
	}{
		{name: "http", want: protocol.HTTP},
		{name: "http-web", want: protocol.HTTP},
		{name: "HTTP2-x", want: protocol.HTTP2},
		{name: "grpc", want: protocol.GRPC},
		{name: "grpc-web", want: protocol.GRPCWeb},
		{name: "grpc-web-ui", want: protocol.GRPCWeb},
		{name: "grpc-api", want: protocol.GRPC},
		{name: "tls-db", want: protocol.TLS},
		{name: "https", want: protocol.HTTPS},
		{name: "redis", want: "REDIS"},
		{name: "httpfoo", want: protocol.TCP},
		{name: "", want: protocol.TCP},
		{name: "web", appProtocol: "http", want: protocol.HTTP},
		{name: "tcp-x", appProtocol: "grpc", want: protocol.GRPC},
		{name: "web", appProtocol: "kubernetes.io/h2c", want: protocol.HTTP2},
		{name: "web", appProtocol: "kubernetes.io/ws", want: protocol.HTTP},
		{name: "http", appProtocol: "example.com/custom", want: protocol.HTTP}, // unknown appProtocol: the name decides
		{name: "dns", proto: corev1.ProtocolUDP, want: protocol.UDP},
	} {
		p := corev1.ServicePort{Name: tc.name, Protocol: tc.proto}
		if tc.appProtocol != "" {
			p.AppProtocol = ptr(tc.appProtocol)
		}
		got, ok := servicePortProtocol(p)
		if !ok || got != tc.want {
			t.Errorf("port %q appProtocol %q: got %q (%v), want %q", tc.name, tc.appProtocol, got, ok, tc.want)
		}
	}
	if _, ok := servicePortProtocol(corev1.ServicePort{Name: "x", Protocol: corev1.ProtocolSCTP}); ok {
		t.Errorf("SCTP port accepted")
	}
}

func TestServiceEntryFor(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo", Annotations: map[string]string{ExportToAnnotation: ".,other"}},
		Spec: corev1.ServiceSpec{
			ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)},
				{Name: "grpc", Port: 9090, TargetPort: intstr.FromString("grpc")},
			},
		},
	}
	slice := func(name string, ports map[string]int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "demo", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   eps,
		}
		for n, p := range ports {
			s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr(n), Port: ptr(p)})
		}
		return s
	}
	ready := func(addr string, r, serving, terminating *bool, pod string) discoveryv1.Endpoint {
		e := discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: r, Serving: serving, Terminating: terminating}}
		if pod != "" {
			e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: pod, Namespace: "demo"}
		}
		return e
	}
	yes, no := ptr(true), ptr(false)
	eps := []*discoveryv1.EndpointSlice{
		slice("web-a", map[string]int32{"http": 8080, "grpc": 9000},
			ready("10.1.0.2", yes, yes, no, "web-1"),
			ready("10.1.0.1", nil, nil, nil, ""),         // nil ready means ready
			ready("10.1.0.3", no, no, no, "web-3"),       // not ready
			ready("10.1.0.4", no, yes, yes, "web-4"),     // terminating, still serving: no new traffic
			ready("10.1.0.1", yes, yes, no, "duplicate"), // same address twice
		),
	}
	labels := func(ns, name string) (map[string]string, string) {
		if ns == "demo" && name == "web-1" {
			return map[string]string{"app": "web", "version": "v1"}, "us/us-a"
		}
		return nil, ""
	}
	c := serviceEntryFor(svc, eps, labels, "cluster.local")
	se := c.ServiceEntry()
	if c.Kind != istioconfig.KindServiceEntry || c.Namespace != "demo" {
		t.Fatalf("config %v", c.Key())
	}
	if got := se.Hosts; len(got) != 1 || got[0] != "web.demo.svc.cluster.local" {
		t.Errorf("hosts %v", got)
	}
	if got := se.Addresses; len(got) != 1 || got[0] != "10.96.0.10" {
		t.Errorf("addresses %v", got)
	}
	if se.Resolution != networking.ServiceEntry_STATIC {
		t.Errorf("resolution %v", se.Resolution)
	}
	if got := se.ExportTo; len(got) != 2 || got[0] != "." || got[1] != "other" {
		t.Errorf("exportTo %v", got)
	}
	if len(se.Ports) != 2 || se.Ports[0].Protocol != "HTTP" || se.Ports[0].TargetPort != 8080 || se.Ports[1].Protocol != "GRPC" || se.Ports[1].TargetPort != 0 {
		t.Errorf("ports %v", se.Ports)
	}
	var addrs []string
	for _, e := range se.Endpoints {
		addrs = append(addrs, e.Address)
	}
	if len(addrs) != 2 || addrs[0] != "10.1.0.1" || addrs[1] != "10.1.0.2" {
		t.Fatalf("endpoints %v, want the ready 10.1.0.1 and 10.1.0.2", addrs)
	}
	if e := se.Endpoints[1]; e.Labels["version"] != "v1" || e.Ports["http"] != 8080 || e.Ports["grpc"] != 9000 || e.Locality != "us/us-a" {
		t.Errorf("endpoint %v", e)
	}
	if e := se.Endpoints[0]; e.Locality != "" {
		t.Errorf("endpoint without a pod has locality %q", e.Locality)
	}

	// Through the service model: the endpoint ports map service ports to
	// the slice's ports.
	store := istioconfig.NewStore()
	if err := store.Add(c); err != nil {
		t.Fatal(err)
	}
	snap, problems := mesh.Build(store, mesh.BuildOptions{})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	s := snap.Service("web.demo.svc.cluster.local")
	if s == nil || len(s.Endpoints) != 2 || s.Endpoints[1].Ports[80] != 8080 || s.Endpoints[1].Ports[9090] != 9000 || s.Endpoints[1].Locality != "us/us-a" {
		t.Fatalf("service model: %+v", s)
	}
	if !s.VisibleTo("demo") || !s.VisibleTo("other") || s.VisibleTo("third") {
		t.Errorf("visibility wrong for exportTo %v", s.ExportTo)
	}

	// Headless: no address, resolution NONE.
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
	if se := serviceEntryFor(svc, nil, nil, "example.org").ServiceEntry(); len(se.Addresses) != 0 || se.Resolution != networking.ServiceEntry_NONE || se.Hosts[0] != "web.demo.svc.example.org" {
		t.Errorf("headless: %v", se)
	}
	// StatefulSet pods: the slice's endpoint hostnames (ready ones) go in
	// the annotation, and from there on the service model's endpoints.
	named := func(addr string, r *bool, host string) discoveryv1.Endpoint {
		e := ready(addr, r, r, no, "")
		e.Hostname = ptr(host)
		return e
	}
	hc := serviceEntryFor(svc, []*discoveryv1.EndpointSlice{slice("web-h", map[string]int32{"http": 8080},
		named("10.1.0.8", yes, "web-1"), named("10.1.0.7", yes, "web-0"), named("10.1.0.9", no, "web-2"), ready("10.1.0.6", yes, yes, no, ""))}, nil, "cluster.local")
	if got := hc.Annotations[mesh.EndpointHostnamesAnnotation]; got != "10.1.0.7=web-0,10.1.0.8=web-1" {
		t.Errorf("hostnames annotation %q", got)
	}
	hstore := istioconfig.NewStore()
	if err := hstore.Add(hc); err != nil {
		t.Fatal(err)
	}
	hsnap, problems := mesh.Build(hstore, mesh.BuildOptions{})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	var hostnames []string
	for _, e := range hsnap.Service("web.demo.svc.cluster.local").Endpoints {
		hostnames = append(hostnames, e.Address+"="+e.Hostname)
	}
	if want := []string{"10.1.0.6=", "10.1.0.7=web-0", "10.1.0.8=web-1"}; !slices.Equal(hostnames, want) {
		t.Errorf("endpoint hostnames %q, want %q", hostnames, want)
	}
	svc.Spec.Type = corev1.ServiceTypeExternalName
	if c := serviceEntryFor(svc, nil, nil, "cluster.local"); c != nil {
		t.Errorf("ExternalName service converted: %v", c.Key())
	}
}

// A pod's locality: its istio-locality label, else its node's (topology
// labels on the pod are not read).
func TestPodLocality(t *testing.T) {
	nodes := func(name string) string {
		if name == "n1" {
			return "eu/eu-1"
		}
		return ""
	}
	pod := func(labels map[string]string, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{NodeName: node}}
	}
	for _, c := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{pod(map[string]string{"istio-locality": "us.us-a.r1", "topology.kubernetes.io/region": "x"}, "n1"), "us/us-a/r1"},
		{pod(map[string]string{"topology.kubernetes.io/region": "us"}, "n1"), "eu/eu-1"},
		{pod(nil, "n1"), "eu/eu-1"},
		{pod(nil, "n2"), ""},
		{pod(nil, ""), ""},
	} {
		if got := podLocality(c.pod, nodes); got != c.want {
			t.Errorf("podLocality(%v on %q) = %q, want %q", c.pod.Labels, c.pod.Spec.NodeName, got, c.want)
		}
	}
	if got := podLocality(pod(nil, "n1"), nil); got != "" {
		t.Errorf("no node lookup: %q", got)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
		"topology.kubernetes.io/region": "us", "topology.kubernetes.io/zone": "us-a", "topology.istio.io/subzone": "r2"}}}
	if got := nodeLocality(n); got != "us/us-a/r2" {
		t.Errorf("nodeLocality = %q", got)
	}
}

func TestWorkloadEntryFor(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "demo", Labels: map[string]string{"app": "web",
			"istio-locality": "us.us-b"}},
		Spec:   corev1.PodSpec{ServiceAccountName: "web"},
		Status: corev1.PodStatus{PodIP: "10.1.0.2", Phase: corev1.PodRunning},
	}
	we := workloadEntryFor(pod, podLocality(pod, nil)).WorkloadEntry()
	if we.Address != "10.1.0.2" || we.ServiceAccount != "web" || we.Labels["app"] != "web" || we.Locality != "us/us-b" {
		t.Errorf("workload entry %v", we)
	}
	for name, mutate := range map[string]func(*corev1.Pod){
		"no IP":        func(p *corev1.Pod) { p.Status.PodIP = "" },
		"host network": func(p *corev1.Pod) { p.Spec.HostNetwork = true },
		"succeeded":    func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded },
	} {
		p := pod.DeepCopy()
		mutate(p)
		if c := workloadEntryFor(p, ""); c != nil {
			t.Errorf("%s: got a workload entry", name)
		}
	}
}

func TestIstioConfig(t *testing.T) {
	vs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
		"metadata": map[string]any{"name": "web", "namespace": "demo", "labels": map[string]any{"team": "a"}},
		"spec": map[string]any{
			"hosts": []any{"web"},
			"http":  []any{map[string]any{"route": []any{map[string]any{"destination": map[string]any{"host": "web", "subset": "v1"}}}}},
		},
		"status": map[string]any{"observedGeneration": int64(1)},
	}}
	c, err := istioConfig("networking.istio.io", "VirtualService", "v1", vs)
	if err != nil {
		t.Fatal(err)
	}
	if c.Key() != (proxypush.ConfigKey{Kind: istioconfig.KindVirtualService, Name: "web", Namespace: "demo"}) || c.Labels["team"] != "a" {
		t.Errorf("config %v labels %v", c.Key(), c.Labels)
	}
	if got := c.VirtualService().Http[0].Route[0].Destination.Subset; got != "v1" {
		t.Errorf("subset %q", got)
	}

	// The file registry's validation applies: a missing field, and an
	// unknown one named by its path.
	bad := vs.DeepCopy()
	delete(bad.Object["spec"].(map[string]any), "http")
	if _, err := istioConfig("networking.istio.io", "VirtualService", "v1", bad); err == nil || !strings.Contains(err.Error(), "must have at least one of http, tcp or tls routes") {
		t.Errorf("VirtualService without routes: error %v", err)
	}
	typo := vs.DeepCopy()
	typo.Object["spec"].(map[string]any)["gatways"] = []any{"mesh"}
	if _, err := istioConfig("networking.istio.io", "VirtualService", "v1", typo); err == nil || !strings.Contains(err.Error(), "gatways") {
		t.Errorf("unknown field: error %v, want one naming gatways", err)
	}
	if _, err := istioConfig("networking.istio.io", "VirtualService", "v1", &unstructured.Unstructured{Object: map[string]any{}}); err == nil {
		t.Error("object without spec accepted")
	}
}

// A VirtualService that sets a field Strait refuses is not served and is
// logged at WARN with its name and the refused field; an invalid one is
// logged as an error.
func TestRefusedConfigLoggedAtWarn(t *testing.T) {
	vs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
		"metadata": map[string]any{"name": "faulty", "namespace": "demo"},
		"spec": map[string]any{
			"hosts": []any{"web"},
			"http": []any{map[string]any{
				"match": []any{map[string]any{"statPrefix": "x"}},
				"route": []any{map[string]any{"destination": map[string]any{"host": "web"}}},
			}},
		},
	}}
	c, err := istioConfig("networking.istio.io", "VirtualService", "v1", vs)
	if c != nil || err == nil || !strings.Contains(err.Error(), "spec.http[0].match[0].statPrefix: not supported by Strait yet") {
		t.Fatalf("config %v, err %v: want statPrefix refused", c, err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	logConfigError(log, "VirtualService", vs, err)
	got := buf.String()
	for _, want := range []string{"level=WARN", "name=demo/faulty", "spec.http[0].match[0].statPrefix: not supported by Strait yet"} {
		if !strings.Contains(got, want) {
			t.Errorf("log %q lacks %q", got, want)
		}
	}

	buf.Reset()
	bad := vs.DeepCopy()
	delete(bad.Object["spec"].(map[string]any), "http")
	_, err = istioConfig("networking.istio.io", "VirtualService", "v1", bad)
	logConfigError(log, "VirtualService", bad, err)
	if got := buf.String(); !strings.Contains(got, "level=ERROR") || !strings.Contains(got, "name=demo/faulty") {
		t.Errorf("invalid config logged as %q, want an error naming it", got)
	}
}

// A RequestAuthentication (security.istio.io) is read like the networking
// kinds, with the same validation.
func TestIstioConfigRequestAuthentication(t *testing.T) {
	ra := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "security.istio.io/v1", "kind": "RequestAuthentication",
		"metadata": map[string]any{"name": "jwt", "namespace": "demo"},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"jwtRules": []any{map[string]any{"issuer": "https://issuer.test", "jwksUri": "https://issuer.test/jwks"}},
		},
	}}
	c, err := istioConfig("security.istio.io", "RequestAuthentication", "v1", ra)
	if err != nil {
		t.Fatal(err)
	}
	if c.Key() != (proxypush.ConfigKey{Kind: istioconfig.KindRequestAuthentication, Name: "jwt", Namespace: "demo"}) || c.RequestAuthentication().JwtRules[0].Issuer != "https://issuer.test" {
		t.Errorf("config %v", c)
	}
	bad := ra.DeepCopy()
	bad.Object["spec"].(map[string]any)["jwtRules"] = []any{map[string]any{"jwksUri": "https://issuer.test/jwks"}}
	if _, err := istioConfig("security.istio.io", "RequestAuthentication", "v1", bad); err == nil || !strings.Contains(err.Error(), "spec.jwtRules[0].issuer") {
		t.Errorf("rule without issuer: %v", err)
	}
}
