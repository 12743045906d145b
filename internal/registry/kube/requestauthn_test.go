package kube

import (
	"bytes"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	securityapi "istio.io/api/security/v1beta1"
	typeapi "istio.io/api/type/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"

	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestRequestAuthentication: a RequestAuthentication created through the
// API server puts jwt_authn on the selected pod's inbound listener;
// deleting it takes the filter away. A pod it does not select never gets
// it.
func TestRequestAuthentication(t *testing.T) {
	env := sharedEnv(t)
	f := newFixture(t, env, "jwt")
	web := f.pod("web", "10.200.6.1", map[string]string{"app": "web"})
	other := f.pod("other", "10.200.6.2", map[string]string{"app": "other"})
	f.service("web", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)})
	f.endpoints("web", "http", 8080, []string{"10.200.6.1"}, nil)
	f.service("other", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)})
	f.endpoints("other", "http", 8080, []string{"10.200.6.2"}, nil)
	p := startPlane(t, env.Config, Options{})
	cw := dialADS(t, p.addr, web)
	cw.subscribe(t, xdsapi.ListenerType)
	co := dialADS(t, p.addr, other)
	co.subscribe(t, xdsapi.ListenerType)
	hasJWT := func(c *adsClient) bool {
		for _, r := range c.resources(xdsapi.ListenerType) {
			if bytes.Contains(r, []byte("envoy.filters.http.jwt_authn")) {
				return true
			}
		}
		return false
	}
	inbound := func(c *adsClient) bool {
		for _, r := range c.resources(xdsapi.ListenerType) {
			if bytes.Contains(r, []byte("inbound|8080||")) {
				return true
			}
		}
		return false
	}
	cw.wait(t, "the web pod's inbound listener", 10*time.Second, func() bool { return inbound(cw) })
	co.wait(t, "the other pod's inbound listener", 10*time.Second, func() bool { return inbound(co) })
	if hasJWT(cw) {
		t.Fatal("jwt_authn before any RequestAuthentication")
	}

	ra := &securityv1.RequestAuthentication{ObjectMeta: metav1.ObjectMeta{Name: "web-jwt", Namespace: f.ns}}
	ra.Spec.Selector = &typeapi.WorkloadSelector{MatchLabels: map[string]string{"app": "web"}}
	ra.Spec.JwtRules = []*securityapi.JWTRule{{Issuer: "https://issuer.kube.test", Jwks: `{"keys":[]}`, OutputPayloadToHeader: "x-jwt-payload"}}
	if _, err := f.istio.SecurityV1().RequestAuthentications(f.ns).Create(f.ctx, ra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cw.wait(t, "jwt_authn on the selected pod", 10*time.Second, func() bool { return hasJWT(cw) })
	if hasJWT(co) {
		t.Error("the pod the selector does not match got jwt_authn")
	}
	if err := f.istio.SecurityV1().RequestAuthentications(f.ns).Delete(f.ctx, "web-jwt", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cw.wait(t, "jwt_authn gone after delete", 10*time.Second, func() bool { return !hasJWT(cw) })
}
