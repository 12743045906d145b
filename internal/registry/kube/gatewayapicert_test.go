package kube

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/registry/kube/gatewayapi"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// listenerStatus is the status.listeners entry name of a Gateway.
func listenerStatus(u *unstructured.Unstructured, name string) map[string]any {
	ls, _, _ := unstructured.NestedSlice(u.Object, "status", "listeners")
	for _, l := range ls {
		if m, _ := l.(map[string]any); m["name"] == name {
			return m
		}
	}
	return map[string]any{}
}

func listenerHas(u *unstructured.Unstructured, name, typ, status, reason string) bool {
	conds, _ := listenerStatus(u, name)["conditions"].([]any)
	return hasCondition(conds, typ, status, reason)
}

// TestGatewayAPICertificateRefsOnRealAPIServer: the translation looks up
// an HTTPS listener's Secret, and a Secret's change translates again. A
// listener whose Secret is missing, then malformed, is ResolvedRefs=False
// InvalidCertificateRef and Programmed=False, and still counts the route
// attached to it; once the Secret holds a certificate and key it is
// served. A certificate of another namespace is RefNotPermitted until a
// ReferenceGrant allows it; then the gateway's listener reads it over
// ADS as kubernetes-gateway://NAMESPACE/NAME and straitd serves it to
// that gateway, not to a gateway of another namespace; the grant's
// removal takes it back.
func TestGatewayAPICertificateRefsOnRealAPIServer(t *testing.T) {
	env := sharedEnv(t)
	f := newFixture(t, env, "kgwcert")
	certs := newFixture(t, env, "kgwcerts")
	other := newFixture(t, env, "kgwcertother")
	if err := env.InstallGatewayAPICRDs(f.ctx); err != nil {
		t.Fatal(err)
	}
	p := startPlane(t, env.Config, Options{GatewayAPI: true})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := p.reg.WriteStatus(ctx); err != nil {
			t.Errorf("WriteStatus: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	classes := env.Dynamic.Resource(gwapiGVR("gatewayclasses"))
	if _, err := classes.Create(f.ctx, fromYAML(t, `
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: istio-certs}
spec: {controllerName: istio.io/gateway-controller}
`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = classes.Delete(context.Background(), "istio-certs", metav1.DeleteOptions{}) })
	f.service("web", corev1.ServicePort{Name: "http", Port: 80})
	gateways := env.Dynamic.Resource(gwapiGVR("gateways")).Namespace(f.ns)
	if _, err := gateways.Create(f.ctx, fromYAML(t, `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: istio-certs
  listeners:
  - name: local
    port: 443
    protocol: HTTPS
    hostname: local.example.com
    tls: {certificateRefs: [{name: late}]}
  - name: xns
    port: 8443
    protocol: HTTPS
    tls: {certificateRefs: [{name: shared, namespace: kgwcerts}]}
`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Dynamic.Resource(gwapiGVR("httproutes")).Namespace(f.ns).Create(f.ctx, fromYAML(t, `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{name: gw, sectionName: local}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, gateways, "gw", "listener local unresolved (no Secret), its route attached; xns not permitted", func(u *unstructured.Unstructured) bool {
		return listenerHas(u, "local", "ResolvedRefs", "False", "InvalidCertificateRef") && listenerHas(u, "local", "Programmed", "False", "Invalid") &&
			listenerStatus(u, "local")["attachedRoutes"] == int64(1) &&
			listenerHas(u, "xns", "ResolvedRefs", "False", "RefNotPermitted") && listenerHas(u, "xns", "Programmed", "False", "Invalid")
	})

	// A malformed Secret (the conformance suite's: "Hello world" as both
	// certificate and key) does not resolve it either.
	hello := []byte("Hello world\n")
	late := secretOf(f.ns, "late", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": hello, "tls.key": hello})
	if _, err := f.kube.CoreV1().Secrets(f.ns).Create(f.ctx, late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, gateways, "gw", "listener local: the Secret is malformed", func(u *unstructured.Unstructured) bool {
		conds, _ := listenerStatus(u, "local")["conditions"].([]any)
		c := condition(conds, "ResolvedRefs")
		return c != nil && c["status"] == "False" && strings.Contains(c["message"].(string), "do not make a key pair")
	})
	a := newTestPKI(t, "local.example.com")
	late.Data = map[string][]byte{"tls.crt": a.certPEM, "tls.key": a.keyPEM}
	if _, err := f.kube.CoreV1().Secrets(f.ns).Update(f.ctx, late, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, gateways, "gw", "listener local resolved once its Secret holds a key pair", func(u *unstructured.Unstructured) bool {
		return listenerHas(u, "local", "ResolvedRefs", "True", "") && listenerHas(u, "local", "Programmed", "True", "") &&
			listenerStatus(u, "local")["attachedRoutes"] == int64(1)
	})

	// The certificate of another namespace, with a ReferenceGrant.
	if _, err := certs.kube.CoreV1().Secrets(certs.ns).Create(certs.ctx,
		secretOf(certs.ns, "shared", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": a.certPEM, "tls.key": a.keyPEM}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grants := env.Dynamic.Resource(schema.GroupVersionResource{Group: GatewayAPIGroup, Version: "v1beta1", Resource: "referencegrants"}).Namespace(certs.ns)
	if _, err := grants.Create(certs.ctx, fromYAML(t, `
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: gw-certs}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: kgwcert}]
  to: [{group: "", kind: Secret, name: shared}]
`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, gateways, "gw", "listener xns resolved with the ReferenceGrant", func(u *unstructured.Unstructured) bool {
		return listenerHas(u, "xns", "ResolvedRefs", "True", "") && listenerHas(u, "xns", "Programmed", "True", "")
	})
	const resource = "kubernetes-gateway://kgwcerts/shared"
	// The gateway's listener on 8443 reads the certificate over ADS by
	// that name.
	f.pod("gw-istio-0", "10.200.10.1", gatewayapi.PodSelector(f.ns, "gw"))
	router, err := proxypush.ParseNodeID(proxypush.TypedNodeID(proxypush.Router, "10.200.10.1", "gw-istio-0", f.ns, ""))
	if err != nil {
		t.Fatal(err)
	}
	router.PeerIP = netip.MustParseAddr("10.200.10.1")
	var sds []string
	waitFor(t, func() bool {
		sds = listenerSecrets(t, p, router, "0.0.0.0_8443")
		return slices.Equal(sds, []string{resource})
	}, "the gateway's 8443 listener with the certificate of kgwcerts (has "+strings.Join(sds, ", ")+")")
	log := slog.New(slog.DiscardHandler)
	res, err := generateSecrets(secretStore{p.reg.secretsStore()}, log, router, []string{resource, "kubernetes-gateway://kgwcerts/other"}, checkSecretPeer, p.reg.crossNamespaceCredential)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].GetName() != resource {
		t.Fatalf("served %v, want %s only", res, resource)
	}
	var s tlsv3.Secret
	if err := res[0].GetResource().UnmarshalTo(&s); err != nil {
		t.Fatal(err)
	}
	if string(s.GetTlsCertificate().GetPrivateKey().GetInlineBytes()) != string(a.keyPEM) {
		t.Errorf("secret %s does not hold kgwcerts/shared's key", resource)
	}
	// A gateway of another namespace does not get it.
	stranger, err := proxypush.ParseNodeID(proxypush.TypedNodeID(proxypush.Router, "10.200.10.2", "gw-istio-0", other.ns, ""))
	if err != nil {
		t.Fatal(err)
	}
	stranger.PeerIP = netip.MustParseAddr("10.200.10.2")
	if res, err := generateSecrets(secretStore{p.reg.secretsStore()}, log, stranger, []string{resource}, checkSecretPeer, p.reg.crossNamespaceCredential); err != nil || len(res) != 0 {
		t.Errorf("a gateway of namespace %s got %v (%v)", other.ns, res, err)
	}

	// Without the grant, the listener is not permitted again, and the
	// certificate is no longer served.
	if err := grants.Delete(certs.ctx, "gw-certs", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, gateways, "gw", "listener xns not permitted once the grant is gone", func(u *unstructured.Unstructured) bool {
		return listenerHas(u, "xns", "ResolvedRefs", "False", "RefNotPermitted")
	})
	waitFor(t, func() bool {
		res, err := generateSecrets(secretStore{p.reg.secretsStore()}, log, router, []string{resource}, checkSecretPeer, p.reg.crossNamespaceCredential)
		return err == nil && len(res) == 0
	}, "the certificate no longer served")
}

// listenerSecrets are the SDS resource names of the certificates of the
// router's listener name, as the registry's snapshot generates it.
func listenerSecrets(t *testing.T, p *plane, router *proxypush.Proxy, name string) []string {
	t.Helper()
	res, err := gen.New(p.reg).Generate(router, xdsapi.ListenerType, nil, &proxypush.PushRequest{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range res {
		var l listener.Listener
		if r.GetResource().UnmarshalTo(&l) != nil || l.Name != name {
			continue
		}
		for _, fc := range l.FilterChains {
			var ctx tlsv3.DownstreamTlsContext
			if fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(&ctx) != nil {
				continue
			}
			for _, s := range ctx.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs() {
				if s.GetSdsConfig().GetAds() == nil {
					t.Errorf("%s: secret %s not read over ADS", name, s.GetName())
				}
				out = append(out, s.GetName())
			}
		}
	}
	return out
}
