package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// serveLoadBalancer is the one-node cluster's load balancer: every
// LoadBalancer Service (the gateways straitd deploys, Istio's default
// type) gets its ClusterIP as its load balancer ingress, as a cloud's
// controller would give it an external address. straitd writes that
// address into the Gateway's status.addresses, where the suite reads it;
// the host reaches it through kube-proxy (routeServiceCIDR). It polls
// until ctx ends.
func serveLoadBalancer(ctx context.Context, client kubernetes.Interface, logf func(string, ...any)) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		// Each pass is bounded: a call the API server never answers must
		// not stop the load balancer for the rest of the run.
		passCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := assignLoadBalancerIPs(passCtx, client, logf)
		cancel()
		if err != nil && ctx.Err() == nil {
			logf("load balancer: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// assignLoadBalancerIPs sets the ingress of every LoadBalancer Service
// whose ingress is not its ClusterIP; a Service that cannot be written
// (deleted meanwhile) does not keep the others waiting.
func assignLoadBalancerIPs(ctx context.Context, client kubernetes.Interface, logf func(string, ...any)) error {
	svcs, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var errs []error
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		ip := svc.Spec.ClusterIP
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || ip == "" || ip == corev1.ClusterIPNone {
			continue
		}
		if in := svc.Status.LoadBalancer.Ingress; len(in) == 1 && in[0].IP == ip {
			continue
		}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		if _, err := client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("service %s/%s: %w", svc.Namespace, svc.Name, err))
			continue
		}
		logf("load balancer: service %s/%s at %s", svc.Namespace, svc.Name, ip)
	}
	return errors.Join(errs...)
}

// TestServeLoadBalancer: a LoadBalancer Service gets its ClusterIP as its
// ingress, a ClusterIP Service and a headless one are left alone, and a
// Service already at its address is not written again.
func TestServeLoadBalancer(t *testing.T) {
	lb := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "web-istio"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.10"}}
	plain := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "backend"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.11"}}
	headless := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "headless-lb"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: corev1.ClusterIPNone}}
	client := fake.NewClientset(lb, plain, headless)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lbCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { serveLoadBalancer(lbCtx, client, t.Logf); close(done) }()
	for {
		got, err := client.CoreV1().Services("gw").Get(ctx, "web-istio", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if in := got.Status.LoadBalancer.Ingress; len(in) == 1 && in[0].IP == "10.96.0.10" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("web-istio never got its ClusterIP as its ingress: %+v", got.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	<-done
	for _, name := range []string{"backend", "headless-lb"} {
		got, err := client.CoreV1().Services("gw").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Status.LoadBalancer.Ingress) != 0 {
			t.Errorf("%s got an ingress %+v, want none", name, got.Status.LoadBalancer.Ingress)
		}
	}
	client.ClearActions()
	if err := assignLoadBalancerIPs(ctx, client, t.Logf); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "update" {
			t.Errorf("a Service at its address was written again: %v", a)
		}
	}
}

// TestAssignLoadBalancerIPsGoesOn: a Service whose status cannot be
// written is reported, and the other Services still get their address.
func TestAssignLoadBalancerIPsGoesOn(t *testing.T) {
	svc := func(name, ip string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: ip}}
	}
	client := fake.NewClientset(svc("a-gone", "10.96.0.20"), svc("b-web", "10.96.0.21"))
	client.PrependReactor("update", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if u, ok := a.(k8stesting.UpdateAction); ok && u.GetObject().(*corev1.Service).Name == "a-gone" {
			return true, nil, errors.New("the object has been deleted")
		}
		return false, nil, nil
	})
	ctx := context.Background()
	err := assignLoadBalancerIPs(ctx, client, t.Logf)
	if err == nil || !strings.Contains(err.Error(), "gw/a-gone") {
		t.Errorf("error %v, want one naming gw/a-gone", err)
	}
	got, err := client.CoreV1().Services("gw").Get(ctx, "b-web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if in := got.Status.LoadBalancer.Ingress; len(in) != 1 || in[0].IP != "10.96.0.21" {
		t.Errorf("b-web ingress %+v, want 10.96.0.21 despite a-gone's failure", in)
	}
}
