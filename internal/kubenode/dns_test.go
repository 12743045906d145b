package kubenode

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// startTestDNS serves a ClusterDNS over a fake clientset with objs on
// loopback until the test ends.
func startTestDNS(t *testing.T, objs ...runtime.Object) (*ClusterDNS, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objs...)
	d, err := NewClusterDNS(DNSOptions{Client: client, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-d.Ready():
	case err := <-done:
		t.Fatalf("Run ended before ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("cluster DNS not ready after 30s")
	}
	return d, client
}

// query asks addr over network (udp or tcp) for name's records of type qtype.
func query(t *testing.T, network, addr, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("query %s %s over %s: %v", name, dns.TypeToString[qtype], network, err)
	}
	return r
}

// addrsOf returns the A/AAAA addresses and CNAME targets of the answer.
func addrsOf(r *dns.Msg) []string {
	var out []string
	for _, rr := range r.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			out = append(out, rr.A.String())
		case *dns.AAAA:
			out = append(out, rr.AAAA.String())
		case *dns.CNAME:
			out = append(out, "CNAME "+rr.Target)
		}
	}
	return out
}

func service(ns, name string, mutate func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP},
	}
	mutate(s)
	return s
}

func endpointSlice(ns, svc, name string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
	}
}

func endpoint(ready *bool, hostname string, addrs ...string) discoveryv1.Endpoint {
	ep := discoveryv1.Endpoint{Addresses: addrs, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	if hostname != "" {
		ep.Hostname = &hostname
	}
	return ep
}

func TestClusterDNSAnswers(t *testing.T) {
	yes, no := true, false
	d, _ := startTestDNS(t,
		service("demo", "server", func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.20", []string{"10.96.0.20"}
		}),
		service("demo", "dual", func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.21", []string{"10.96.0.21", "fd00::21"}
		}),
		service("demo", "db", func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
		}),
		service("demo", "warm", func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.PublishNotReadyAddresses = corev1.ClusterIPNone, true
		}),
		service("demo", "ext", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "db.example.com"
		}),
		// Two slices of db, one endpoint in both (as during a slice
		// update), one not ready, one ready by omission.
		endpointSlice("demo", "db", "db-a", endpoint(&yes, "db-0", "10.77.5.101"), endpoint(&no, "", "10.77.5.102")),
		endpointSlice("demo", "db", "db-b", endpoint(nil, "db-1", "10.77.5.103"), endpoint(&yes, "", "10.77.5.101")),
		endpointSlice("demo", "warm", "warm-a", endpoint(&no, "", "10.77.5.110")),
		// A slice of another Service must not leak into db's answer.
		endpointSlice("demo", "other", "other-a", endpoint(&yes, "", "10.77.5.120")),
	)
	addr := d.Addr()
	for _, tc := range []struct {
		name  string
		qtype uint16
		rcode int
		want  []string
	}{
		{"server.demo.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"10.96.0.20"}},
		{"SERVER.Demo.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"10.96.0.20"}},
		// A name with no record of the type is NODATA, not NXDOMAIN
		// (a resolver asking A and AAAA at once must keep the A).
		{"server.demo.svc.cluster.local", dns.TypeAAAA, dns.RcodeSuccess, nil},
		{"dual.demo.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"10.96.0.21"}},
		{"dual.demo.svc.cluster.local", dns.TypeAAAA, dns.RcodeSuccess, []string{"fd00::21"}},
		{"db.demo.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"10.77.5.101", "10.77.5.103"}},
		{"db-0.db.demo.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"10.77.5.101"}},
		{"db-1.db.demo.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"10.77.5.103"}},
		{"db-9.db.demo.svc.cluster.local", dns.TypeA, dns.RcodeNameError, nil},
		{"x.server.demo.svc.cluster.local", dns.TypeA, dns.RcodeNameError, nil},
		{"warm.demo.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"10.77.5.110"}},
		{"ext.demo.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"CNAME db.example.com."}},
		{"demo.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, nil},
		{"svc.cluster.local", dns.TypeA, dns.RcodeSuccess, nil},
		{"cluster.local", dns.TypeA, dns.RcodeSuccess, nil},
		// What a pod's search path makes of "server.demo" and of the FQDN.
		{"server.demo.demo.svc.cluster.local", dns.TypeA, dns.RcodeNameError, nil},
		{"server.demo.svc.cluster.local.cluster.local", dns.TypeA, dns.RcodeNameError, nil},
		{"missing.demo.svc.cluster.local", dns.TypeA, dns.RcodeNameError, nil},
		{"server.other.svc.cluster.local", dns.TypeA, dns.RcodeNameError, nil},
		{"other.svc.cluster.local", dns.TypeA, dns.RcodeNameError, nil},
		{"a.b.server.demo.svc.cluster.local", dns.TypeA, dns.RcodeNameError, nil},
		{"10-77-5-101.demo.pod.cluster.local", dns.TypeA, dns.RcodeNameError, nil},
		// Outside the domain: no upstream, nothing forwarded.
		{"example.com", dns.TypeA, dns.RcodeRefused, nil},
		{"server.demo", dns.TypeA, dns.RcodeRefused, nil},
		{"notcluster.local", dns.TypeA, dns.RcodeRefused, nil},
	} {
		r := query(t, "udp", addr, tc.name, tc.qtype)
		got := addrsOf(r)
		if r.Rcode != tc.rcode || !slices.Equal(got, tc.want) {
			t.Errorf("%s %s: %s %v, want %s %v", tc.name, dns.TypeToString[tc.qtype],
				dns.RcodeToString[r.Rcode], got, dns.RcodeToString[tc.rcode], tc.want)
		}
		inDomain := tc.rcode != dns.RcodeRefused
		if r.Authoritative != inDomain {
			t.Errorf("%s: authoritative %v, want %v", tc.name, r.Authoritative, inDomain)
		}
		if inDomain && len(r.Answer) == 0 {
			if len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA || r.Ns[0].Header().Name != "cluster.local." {
				t.Errorf("%s: negative answer without the cluster.local SOA: %v", tc.name, r.Ns)
			}
		}
		for _, rr := range r.Answer {
			if rr.Header().Ttl != dnsTTL || !strings.EqualFold(rr.Header().Name, dns.Fqdn(tc.name)) {
				t.Errorf("%s: record %v, want TTL %d and the queried name", tc.name, rr, dnsTTL)
			}
		}
	}

	// TCP serves the same answers.
	if got := addrsOf(query(t, "tcp", addr, "server.demo.svc.cluster.local", dns.TypeA)); !slices.Equal(got, []string{"10.96.0.20"}) {
		t.Errorf("over TCP: %v, want [10.96.0.20]", got)
	}
}

// A Service created after start is answered once the informer sees it,
// and its deletion is NXDOMAIN again.
func TestClusterDNSFollowsServices(t *testing.T) {
	d, client := startTestDNS(t)
	const name = "late.demo.svc.cluster.local"
	if r := query(t, "udp", d.Addr(), name, dns.TypeA); r.Rcode != dns.RcodeNameError {
		t.Fatalf("%s before the Service: %s", name, dns.RcodeToString[r.Rcode])
	}
	ctx := context.Background()
	svc := service("demo", "late", func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0.30" })
	if _, err := client.CoreV1().Services("demo").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, d.Addr(), name, []string{"10.96.0.30"})
	if err := client.CoreV1().Services("demo").Delete(ctx, "late", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, d.Addr(), name, nil)
}

// waitAnswer waits up to 10 s for name's A answer to be want (nil:
// NXDOMAIN).
func waitAnswer(t *testing.T, addr, name string, want []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := query(t, "udp", addr, name, dns.TypeA)
		got := addrsOf(r)
		if slices.Equal(got, want) && (want != nil || r.Rcode == dns.RcodeNameError) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s %v, want %v", name, dns.RcodeToString[r.Rcode], got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A truncated UDP answer says so, and the client gets it whole over TCP.
func TestClusterDNSTruncatesOverUDP(t *testing.T) {
	var eps []discoveryv1.Endpoint
	for i := range 60 {
		eps = append(eps, endpoint(nil, "", net.IPv4(10, 77, 5, byte(i+1)).String()))
	}
	d, _ := startTestDNS(t,
		service("demo", "big", func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }),
		endpointSlice("demo", "big", "big-a", eps...),
	)
	r := query(t, "udp", d.Addr(), "big.demo.svc.cluster.local", dns.TypeA)
	if !r.Truncated || len(r.Answer) >= 60 {
		t.Errorf("UDP answer of 60 records: truncated %v with %d records, want truncated", r.Truncated, len(r.Answer))
	}
	r = query(t, "tcp", d.Addr(), "big.demo.svc.cluster.local", dns.TypeA)
	if r.Truncated || len(r.Answer) != 60 {
		t.Errorf("TCP answer: truncated %v with %d records, want all 60", r.Truncated, len(r.Answer))
	}
}

// Run's end closes both sockets: the address can be bound again.
func TestClusterDNSRunReleasesAddress(t *testing.T) {
	client := fake.NewClientset()
	d, err := NewClusterDNS(DNSOptions{Client: client, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-d.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("not ready")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	pc, err := net.ListenPacket("udp", d.Addr())
	if err != nil {
		t.Fatalf("udp %s still bound after Run: %v", d.Addr(), err)
	}
	pc.Close()
	ln, err := net.Listen("tcp", d.Addr())
	if err != nil {
		t.Fatalf("tcp %s still bound after Run: %v", d.Addr(), err)
	}
	ln.Close()
}

func TestNewClusterDNSRefusesBadOptions(t *testing.T) {
	if _, err := NewClusterDNS(DNSOptions{Addr: "127.0.0.1:0"}); err == nil || !strings.Contains(err.Error(), "Client") {
		t.Errorf("no client: %v, want an error naming DNSOptions.Client", err)
	}
	if _, err := NewClusterDNS(DNSOptions{Client: fake.NewClientset(), Addr: "127.0.0.1:0", Domain: "bad..domain"}); err == nil || !strings.Contains(err.Error(), "Domain") {
		t.Errorf("bad domain: %v, want an error naming DNSOptions.Domain", err)
	}
}
