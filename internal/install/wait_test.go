package install

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestWaitKeepsPodProblemWhenListFails: a pod list that fails after one
// that showed the problem (the timeout cut it short, the API server
// throttled it) must not drop the problem from the final error.
func TestWaitKeepsPodProblemWhenListFails(t *testing.T) {
	deploy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "straitd", "namespace": DefaultNamespace, "generation": int64(1)},
		"spec": map[string]any{
			"replicas": int64(1),
			"selector": map[string]any{"matchLabels": map[string]any{"app": "istiod"}},
		},
		"status": map[string]any{"observedGeneration": int64(1)},
	}}
	pod := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "straitd-abc", "namespace": DefaultNamespace, "labels": map[string]any{"app": "istiod"}},
		"status": map[string]any{"containerStatuses": []any{map[string]any{
			"name": "discovery", "state": map[string]any{"waiting": map[string]any{"reason": "ErrImageNeverPull", "message": "not present"}},
		}}},
	}}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{podGVR: "PodList", deployGVR: "DeploymentList"}, deploy, pod)
	var lists atomic.Int32
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if lists.Add(1) == 1 {
			return false, nil, nil // the first list is answered
		}
		return true, nil, errors.New("client rate limiter Wait returned an error: context deadline exceeded")
	})
	var out bytes.Buffer
	c := &Client{Dynamic: client, Out: &out, PollInterval: 5 * time.Millisecond}
	err := c.Wait(context.Background(), DefaultNamespace, 200*time.Millisecond)
	const want = "pod straitd-abc: container discovery ErrImageNeverPull (not present)"
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), want) {
		t.Errorf("wait: err %v, want not available with %q", err, want)
	}
	if lists.Load() < 2 {
		t.Fatalf("pods listed %d times, want a failed list after the first", lists.Load())
	}
	if got := strings.Count(out.String(), "\n"); got != 1 {
		t.Errorf("wait printed %q, want one progress line (a failed list changes nothing)", out.String())
	}
}
