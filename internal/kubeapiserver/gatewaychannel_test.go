package kubeapiserver

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestGatewayAPIChannels: an HTTPRoute rule's retry (an experimental
// field of the Gateway API) is pruned by the API server under the
// standard-channel CRDs, so that no controller ever sees it (the
// conformance suite's HTTPRouteRetry then meets Istio's default retry
// policy), and kept once the experimental CRDs replace them; both
// channels' CRDs carry their channel's annotation, which the suite reads
// (it refuses CRDs of mixed channels).
func TestGatewayAPIChannels(t *testing.T) {
	env := Start(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "routes"}}
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	routes := env.Dynamic.Resource(schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}).Namespace("routes")
	crds := env.Dynamic.Resource(CRDResource)
	for _, tc := range []struct {
		channel   GatewayAPIChannel
		wantRetry bool
	}{
		{GatewayAPIStandard, false},
		{GatewayAPIExperimental, true},
	} {
		if err := env.InstallGatewayAPIChannelCRDs(ctx, tc.channel); err != nil {
			t.Fatal(err)
		}
		crd, err := crds.Get(ctx, "httproutes.gateway.networking.k8s.io", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := crd.GetAnnotations()["gateway.networking.k8s.io/channel"]; got != string(tc.channel) {
			t.Errorf("%s: the HTTPRoute CRD's channel annotation is %q", tc.channel, got)
		}
		name := "retries-" + string(tc.channel)
		route := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1",
			"kind":       "HTTPRoute",
			"metadata":   map[string]any{"name": name, "namespace": "routes"},
			"spec": map[string]any{
				"parentRefs": []any{map[string]any{"name": "gw"}},
				"rules": []any{map[string]any{
					"retry":       map[string]any{"codes": []any{int64(500)}, "attempts": int64(3)},
					"backendRefs": []any{map[string]any{"name": "web", "port": int64(8080)}},
				}},
			},
		}}
		// A CRD just replaced may take a moment to be served with its
		// new schema.
		var retry any
		deadline := time.Now().Add(30 * time.Second)
		for {
			_ = routes.Delete(ctx, name, metav1.DeleteOptions{})
			if _, err := routes.Create(ctx, route, metav1.CreateOptions{}); err != nil {
				t.Fatalf("%s: create: %v", tc.channel, err)
			}
			got, err := routes.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rules, _, _ := unstructured.NestedSlice(got.Object, "spec", "rules")
			retry = nil
			if len(rules) == 1 {
				retry = rules[0].(map[string]any)["retry"]
			}
			if (retry != nil) == tc.wantRetry || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		switch {
		case tc.wantRetry && fmt.Sprint(retry) != "map[attempts:3 codes:[500]]":
			t.Errorf("%s CRDs: the stored rule's retry is %v, want attempts 3 and codes [500]", tc.channel, retry)
		case !tc.wantRetry && retry != nil:
			t.Errorf("%s CRDs: the stored rule kept retry %v; the standard schema has no such field", tc.channel, retry)
		}
	}
	if _, err := GatewayAPIChannelCRDs("beta"); err == nil {
		t.Error("an unknown channel was accepted")
	}
}
