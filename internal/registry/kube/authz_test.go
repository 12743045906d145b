package kube

import (
	"strings"
	"testing"
	"time"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbactcp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	securityapi "istio.io/api/security/v1beta1"
	typeapi "istio.io/api/type/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestAuthorizationPolicy: an AuthorizationPolicy written to the API
// server reaches the selected pod's inbound listener as RBAC filters, its
// istio.io/dry-run annotation as shadow rules; deleting it removes them.
func TestAuthorizationPolicy(t *testing.T) {
	env := sharedEnv(t)
	f := newFixture(t, env, "authz")
	node := f.pod("server", "10.200.7.1", map[string]string{"app": "server"})
	p := startPlane(t, env.Config, Options{})
	c := dialADS(t, p.addr, node)
	c.subscribe(t, xdsapi.ListenerType)
	// rbac is the network RBAC config on the inbound passthrough chain.
	rbac := func() *rbactcp.RBAC {
		r := c.latestOf(xdsapi.ListenerType)
		if r == nil {
			return nil
		}
		for _, a := range r.Resources {
			var l listener.Listener
			if a.UnmarshalTo(&l) != nil || l.Name != "virtualInbound" {
				continue
			}
			for _, fc := range l.FilterChains {
				for _, fl := range fc.Filters {
					var cfg rbactcp.RBAC
					if fc.Name == "InboundPassthroughFilterChain" && fl.GetTypedConfig().UnmarshalTo(&cfg) == nil {
						return &cfg
					}
				}
			}
		}
		return nil
	}
	c.wait(t, "LDS", 10*time.Second, func() bool { return c.latestOf(xdsapi.ListenerType) != nil })
	if rbac() != nil {
		t.Fatal("RBAC filter without a policy")
	}

	ap := &securityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-ops", Namespace: f.ns,
		Annotations: map[string]string{"istio.io/dry-run": "true"}}}
	ap.Spec.Selector = &typeapi.WorkloadSelector{MatchLabels: map[string]string{"app": "server"}}
	ap.Spec.Action = securityapi.AuthorizationPolicy_DENY
	ap.Spec.Rules = []*securityapi.Rule{{From: []*securityapi.Rule_From{{Source: &securityapi.Source{Namespaces: []string{"ops"}}}}}}
	if _, err := f.istio.SecurityV1().AuthorizationPolicies(f.ns).Create(f.ctx, ap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.wait(t, "the RBAC filter", 10*time.Second, func() bool { return rbac() != nil })
	cfg := rbac()
	name := "ns[" + f.ns + "]-policy[deny-ops]-rule[0]"
	if cfg.Rules != nil || cfg.ShadowRules.GetPolicies()[name] == nil || cfg.ShadowRulesStatPrefix != "istio_dry_run_deny_" {
		t.Errorf("dry-run policy: rules %v shadow %v prefix %q", cfg.Rules, cfg.ShadowRules, cfg.ShadowRulesStatPrefix)
	}
	if !strings.Contains(cfg.ShadowRules.String(), ".*/ns/ops/.*") {
		t.Errorf("shadow rules %v lack the namespace principal", cfg.ShadowRules)
	}
	if err := f.istio.SecurityV1().AuthorizationPolicies(f.ns).Delete(f.ctx, "deny-ops", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.wait(t, "the RBAC filter to go", 10*time.Second, func() bool { return rbac() == nil })
}
