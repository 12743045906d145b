package main

import (
	"testing"

	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/registry/kube"
)

// TestCredentialPushOnlyToGatewaysOfTheNamespace: the push a Secret
// change makes reaches the routers of the Secret's namespace and no
// other proxy.
func TestCredentialPushOnlyToGatewaysOfTheNamespace(t *testing.T) {
	g := credentialGenerator{}
	req := &proxypush.PushRequest{Full: true, ConfigsUpdated: map[proxypush.ConfigKey]struct{}{
		{Kind: kube.KindSecret, Namespace: "gw", Name: "cred"}: {},
	}}
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{"router~10.0.0.1~ingress-1.gw~gw.svc.cluster.local", true},
		{"router~10.0.0.2~ingress-1.other~other.svc.cluster.local", false},
		{"sidecar~10.0.0.3~app-1.gw~gw.svc.cluster.local", false},
	} {
		p, err := proxypush.ParseNodeID(tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if _, got := g.NeedsPush(p, req); got != tc.want {
			t.Errorf("%s: pushed %t, want %t", tc.id, got, tc.want)
		}
	}
}
