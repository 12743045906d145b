package inject

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Tests for behaviour that mutation testing found unchecked.

// An annotation without a validator does not stop the ones after it.
func TestValidateAfterUnknownAnnotation(t *testing.T) {
	err := ValidateAnnotations(map[string]string{"a.example/x": "1", annoProxyCPU: "x"})
	if err == nil || !strings.Contains(err.Error(), annoProxyCPU) {
		t.Fatalf("error = %v, want the proxyCPU error", err)
	}
}

// A zero quantity is skipped like an unparsable one: the next source counts.
func TestEstimateConcurrencySkipsZero(t *testing.T) {
	for _, limit := range []string{"0", "x"} {
		if got := EstimateConcurrency(nil, map[string]string{annoProxyCPULimit: limit, annoProxyCPU: "2500m"}, Values{}); got != 3 {
			t.Errorf("limit %q: EstimateConcurrency = %d, want 3 (from the request)", limit, got)
		}
	}
}

// An empty selector matches nothing (it would otherwise match every pod).
func TestEmptySelectorMatchesNothing(t *testing.T) {
	if matchesAny([]metav1.LabelSelector{{}}, map[string]string{"app": "a"}) {
		t.Error("an empty selector matched")
	}
	// ...and does not hide a selector after it that matches.
	if !matchesAny([]metav1.LabelSelector{{}, {MatchLabels: map[string]string{"app": "a"}}}, map[string]string{"app": "a"}) {
		t.Error("a matching selector after an empty one did not match")
	}
}

func TestProtoToJSONNilInterface(t *testing.T) {
	if got := protoToJSON(nil); got != "{}" {
		t.Errorf("protoToJSON(nil) = %q", got)
	}
}

// A nil logger is the default one, not a crash.
func TestNilLoggers(t *testing.T) {
	h := NewWebhookHandler(New(nil, Options{}), nil)
	if h.log == nil {
		t.Fatal("nil logger kept")
	}
}

// A review of exactly MaxReviewBytes is read; one byte more is refused.
func TestWebhookBodyLimit(t *testing.T) {
	h := NewWebhookHandler(New(nil, Options{}), quietLogger())
	review := reviewJSON("admission.k8s.io/v1", "u", "default", seedPodJSON(t, nil))
	body := append(review, bytes.Repeat([]byte(" "), MaxReviewBytes-len(review))...)
	if rec := post(h, "application/json", body); rec.Code != http.StatusOK {
		t.Errorf("%d bytes: %d %s", len(body), rec.Code, rec.Body)
	}
	if rec := post(h, "application/json", append(body, ' ')); rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("%d bytes: %d", len(body)+1, rec.Code)
	}
}

// A request that names its workload's kind but not its name still gets
// the pod's workload; Options.NativeSidecars alone makes the proxy native.
func TestInjectRequestDefaults(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	res, err := New(nil, Options{NativeSidecars: true}).Inject(Request{Pod: pod, Workload: metav1.TypeMeta{Kind: "Deployment"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Pod.Labels["service.istio.io/canonical-name"]; got != "p" {
		t.Errorf("canonical name %q, want the pod's workload p", got)
	}
	native := false
	for _, c := range res.Pod.Spec.InitContainers {
		native = native || c.Name == ProxyContainerName
	}
	if !native {
		t.Error("Options.NativeSidecars did not make istio-proxy an init container")
	}
}
