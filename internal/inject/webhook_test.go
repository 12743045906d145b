package inject

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func seedPodJSON(t testing.TB, annotations map[string]string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/seed/nginx.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(b, &pod); err != nil {
		t.Fatal(err)
	}
	pod.Annotations = annotations
	js, err := json.Marshal(&pod)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func reviewJSON(apiVersion, uid, namespace string, object []byte) []byte {
	r := map[string]any{
		"apiVersion": apiVersion,
		"kind":       "AdmissionReview",
		"request": map[string]any{
			"uid":       uid,
			"kind":      map[string]string{"group": "", "version": "v1", "kind": "Pod"},
			"resource":  map[string]string{"group": "", "version": "v1", "resource": "pods"},
			"namespace": namespace,
			"operation": "CREATE",
			"object":    json.RawMessage(object),
		},
	}
	b, _ := json.Marshal(r)
	return b
}

func post(h http.Handler, contentType string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/inject", bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func decodeReview(t testing.TB, rec *httptest.ResponseRecorder) *admissionv1.AdmissionReview {
	t.Helper()
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var r admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("response is not an AdmissionReview: %v\n%s", err, rec.Body)
	}
	if r.Response == nil {
		t.Fatalf("no response: %s", rec.Body)
	}
	return &r
}

// The webhook's patch, applied to the pod the API server sent, gives the
// same pod as kube-inject, for both AdmissionReview versions.
func TestWebhookInjectsWithJSONPatch(t *testing.T) {
	inj := New(nil, Options{})
	h := NewWebhookHandler(inj, quietLogger())
	pod := seedPodJSON(t, nil)
	want, err := inj.Inject(Request{Pod: mustPod(t, pod), Namespace: "default"})
	if err != nil || want.Pod == nil {
		t.Fatalf("Inject: %v %+v", err, want)
	}
	for _, version := range []string{"admission.k8s.io/v1", "admission.k8s.io/v1beta1"} {
		t.Run(version, func(t *testing.T) {
			r := decodeReview(t, post(h, "application/json; charset=utf-8", reviewJSON(version, "uid-1", "default", pod)))
			if r.APIVersion != version || r.Kind != "AdmissionReview" {
				t.Errorf("response is %s %s, want %s AdmissionReview", r.APIVersion, r.Kind, version)
			}
			if r.Response.UID != "uid-1" || !r.Response.Allowed {
				t.Fatalf("response = %+v", r.Response)
			}
			if r.Response.PatchType == nil || *r.Response.PatchType != admissionv1.PatchTypeJSONPatch {
				t.Fatalf("patchType = %v", r.Response.PatchType)
			}
			patched, err := applyJSONPatch(pod, r.Response.Patch)
			if err != nil {
				t.Fatalf("apply patch: %v\n%s", err, r.Response.Patch)
			}
			got := mustPod(t, patched)
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(want.Pod)
			if !bytes.Equal(gj, wj) {
				t.Errorf("patched pod differs from the injected one:\n%s", lineDiff(string(wj), string(gj)))
			}
		})
	}
}

func TestWebhookRefusesInvalidAnnotation(t *testing.T) {
	h := NewWebhookHandler(New(nil, Options{}), quietLogger())
	body := reviewJSON("admission.k8s.io/v1", "uid-2", "default", seedPodJSON(t, map[string]string{"sidecar.istio.io/proxyCPU": "abc"}))
	r := decodeReview(t, post(h, "application/json", body))
	want := `annotation sidecar.istio.io/proxyCPU: "abc" is not a CPU quantity (e.g. "500m")`
	if r.Response.Allowed || r.Response.Result == nil || r.Response.Result.Message != want {
		t.Fatalf("response = %+v, want refusal %q", r.Response, want)
	}
	if r.Response.UID != "uid-2" {
		t.Errorf("uid = %q", r.Response.UID)
	}
}

func TestWebhookAdmitsWithoutPatch(t *testing.T) {
	inj := New(nil, Options{})
	h := NewWebhookHandler(inj, quietLogger())
	cases := map[string][]byte{
		"opt-out":      reviewJSON("admission.k8s.io/v1", "u", "default", seedPodJSON(t, map[string]string{"sidecar.istio.io/inject": "false"})),
		"kube-system":  reviewJSON("admission.k8s.io/v1", "u", "kube-system", seedPodJSON(t, nil)),
		"not a create": bytes.Replace(reviewJSON("admission.k8s.io/v1", "u", "default", seedPodJSON(t, nil)), []byte(`"CREATE"`), []byte(`"UPDATE"`), 1),
		"not a pod":    bytes.Replace(reviewJSON("admission.k8s.io/v1", "u", "default", []byte(`{"kind":"Service"}`)), []byte(`"kind":"Pod"`), []byte(`"kind":"Service"`), 1),
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			r := decodeReview(t, post(h, "application/json", body))
			if !r.Response.Allowed || len(r.Response.Patch) != 0 {
				t.Fatalf("response = %+v", r.Response)
			}
		})
	}

	// With a namespace lookup, an unlabelled namespace is not injected.
	h.NamespaceLabels = func(ns string) (map[string]string, bool) { return map[string]string{}, true }
	r := decodeReview(t, post(h, "application/json", reviewJSON("admission.k8s.io/v1", "u", "default", seedPodJSON(t, nil))))
	if !r.Response.Allowed || len(r.Response.Patch) != 0 {
		t.Fatalf("unlabelled namespace: response = %+v", r.Response)
	}
	h.NamespaceLabels = func(ns string) (map[string]string, bool) {
		return map[string]string{"istio-injection": "enabled"}, true
	}
	r = decodeReview(t, post(h, "application/json", reviewJSON("admission.k8s.io/v1", "u", "default", seedPodJSON(t, nil))))
	if !r.Response.Allowed || len(r.Response.Patch) == 0 {
		t.Fatalf("labelled namespace: response = %+v", r.Response)
	}
}

func TestWebhookBadRequests(t *testing.T) {
	h := NewWebhookHandler(New(nil, Options{}), quietLogger())
	good := reviewJSON("admission.k8s.io/v1", "u", "default", seedPodJSON(t, nil))
	cases := []struct {
		name, contentType string
		body              []byte
		code              int
		msg               string
	}{
		{"yaml content type", "application/yaml", good, http.StatusUnsupportedMediaType, "is not application/json"},
		{"no content type", "", good, http.StatusUnsupportedMediaType, "is not application/json"},
		{"not JSON", "application/json", []byte("{nope"), http.StatusBadRequest, "malformed AdmissionReview"},
		{"empty", "application/json", nil, http.StatusBadRequest, "malformed AdmissionReview"},
		{"wrong kind", "application/json", bytes.Replace(good, []byte(`"kind":"AdmissionReview"`), []byte(`"kind":"Pod"`), 1), http.StatusBadRequest, `kind "Pod" is not AdmissionReview`},
		{"wrong version", "application/json", bytes.Replace(good, []byte("admission.k8s.io/v1"), []byte("admission.k8s.io/v2"), 1), http.StatusBadRequest, `apiVersion "admission.k8s.io/v2"`},
		{"no request", "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), http.StatusBadRequest, "no request"},
		{"no uid", "application/json", bytes.Replace(good, []byte(`"uid":"u"`), []byte(`"uid":""`), 1), http.StatusBadRequest, "request.uid is empty"},
		{"too large", "application/json", bytes.Repeat([]byte(" "), MaxReviewBytes+1), http.StatusRequestEntityTooLarge, "larger than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := post(h, tc.contentType, tc.body)
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.msg) {
				t.Fatalf("got %d %q, want %d containing %q", rec.Code, rec.Body, tc.code, tc.msg)
			}
		})
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/inject", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", rec.Code)
	}

	// A review whose object is not a pod is answered with a refusal.
	r := decodeReview(t, post(h, "application/json", reviewJSON("admission.k8s.io/v1", "u", "default", []byte(`{"spec":{"containers":"nope"}}`))))
	if r.Response.Allowed || !strings.Contains(r.Response.Result.Message, "request.object is not a pod") {
		t.Fatalf("response = %+v", r.Response)
	}
}

// Settings swapped while requests are in flight: every request sees one
// consistent snapshot (run with -race).
func TestInjectConcurrentWithUpdate(t *testing.T) {
	inj := New(nil, Options{})
	alt, err := NewSettings(nil, Values{"global": map[string]any{"tag": "other"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pod := mustPod(t, seedPodJSON(t, nil))
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				res, err := inj.Inject(Request{Pod: pod})
				if err != nil || res.Pod == nil {
					t.Errorf("Inject: %v", err)
					return
				}
				img := res.Pod.Spec.InitContainers[0].Image
				for _, c := range res.Pod.Spec.Containers[1:] {
					if c.Image != img {
						t.Errorf("mixed settings: %s and %s", img, c.Image)
					}
				}
			}
		}()
	}
	for i := 0; i < 40; i++ {
		if i%2 == 0 {
			inj.Update(alt)
		} else {
			inj.Update(DefaultSettings())
		}
	}
	wg.Wait()
	if pod.Annotations != nil || len(pod.Spec.Containers) != 1 {
		t.Fatal("Inject modified its input pod")
	}
}

func FuzzWebhook(f *testing.F) {
	pod := seedPodJSON(f, nil)
	f.Add([]byte(reviewJSON("admission.k8s.io/v1", "u", "default", pod)))
	f.Add([]byte(reviewJSON("admission.k8s.io/v1beta1", "u", "ns", seedPodJSON(f, map[string]string{
		"sidecar.istio.io/proxyCPU": "500m", "proxy.istio.io/config": "concurrency: 2",
		"sidecar.istio.io/userVolume": `{"a":{"emptyDir":{}}}`, "sidecar.istio.io/userVolumeMount": `{"a":{"mountPath":"/a"}}`,
		"traffic.sidecar.istio.io/excludeInboundPorts": "80", "sidecar.istio.io/nativeSidecar": "true",
	}))))
	f.Add([]byte(reviewJSON("admission.k8s.io/v1", "u", "default", []byte(`{"metadata":{"annotations":{"sidecar.istio.io/proxyCPU":"abc"}}}`))))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","kind":{"kind":"Pod"},"operation":"CREATE","object":{"spec":{"containers":[{"name":"istio-proxy"}],"initContainers":[{"name":"istio-init"}]}}}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	h := NewWebhookHandler(New(nil, Options{}), quietLogger())
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := post(h, "application/json", body)
		switch rec.Code {
		case http.StatusOK:
			var r admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || r.Response == nil {
				t.Fatalf("200 without a review: %v %s", err, rec.Body)
			}
			if r.Response.Allowed && len(r.Response.Patch) > 0 {
				var req struct {
					Request struct {
						Object json.RawMessage `json:"object"`
					} `json:"request"`
				}
				_ = json.Unmarshal(body, &req)
				var p corev1.Pod
				if json.Unmarshal(req.Request.Object, &p) == nil {
					orig, _ := json.Marshal(&p)
					if _, err := applyJSONPatch(orig, r.Response.Patch); err != nil {
						t.Fatalf("patch does not apply: %v", err)
					}
				}
			}
		case http.StatusBadRequest:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}

func mustPod(t testing.TB, js []byte) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := json.Unmarshal(js, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

// applyJSONPatch applies the RFC 6902 operations the webhook emits (add,
// remove, replace) to doc.
func applyJSONPatch(doc, patch []byte) ([]byte, error) {
	var root any
	if err := json.Unmarshal(doc, &root); err != nil {
		return nil, err
	}
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		return nil, err
	}
	for _, op := range ops {
		var val any
		if op.Op != "remove" {
			if err := json.Unmarshal(op.Value, &val); err != nil {
				return nil, fmt.Errorf("%s %s: %w", op.Op, op.Path, err)
			}
		}
		var err error
		if root, err = patchAt(root, splitPointer(op.Path), op.Op, val); err != nil {
			return nil, fmt.Errorf("%s %s: %w", op.Op, op.Path, err)
		}
	}
	return json.Marshal(root)
}

func splitPointer(p string) []string {
	if p == "" {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return parts
}

func patchAt(node any, path []string, op string, val any) (any, error) {
	if len(path) == 0 {
		if op == "remove" {
			return nil, nil
		}
		return val, nil
	}
	key, rest := path[0], path[1:]
	switch n := node.(type) {
	case map[string]any:
		if len(rest) == 0 {
			switch op {
			case "remove":
				if _, ok := n[key]; !ok {
					return nil, fmt.Errorf("no member %q", key)
				}
				delete(n, key)
			case "replace":
				if _, ok := n[key]; !ok {
					return nil, fmt.Errorf("no member %q", key)
				}
				n[key] = val
			default:
				n[key] = val
			}
			return n, nil
		}
		child, ok := n[key]
		if !ok {
			return nil, fmt.Errorf("no member %q", key)
		}
		c, err := patchAt(child, rest, op, val)
		n[key] = c
		return n, err
	case []any:
		var i int
		if key == "-" {
			i = len(n)
		} else {
			var err error
			if i, err = strconv.Atoi(key); err != nil || i < 0 || i > len(n) {
				return nil, fmt.Errorf("bad index %q", key)
			}
		}
		if len(rest) == 0 {
			switch op {
			case "add":
				n = append(n[:i], append([]any{val}, n[i:]...)...)
			case "remove":
				if i >= len(n) {
					return nil, fmt.Errorf("index %d out of range", i)
				}
				n = append(n[:i], n[i+1:]...)
			case "replace":
				if i >= len(n) {
					return nil, fmt.Errorf("index %d out of range", i)
				}
				n[i] = val
			}
			return n, nil
		}
		if i >= len(n) {
			return nil, fmt.Errorf("index %d out of range", i)
		}
		c, err := patchAt(n[i], rest, op, val)
		n[i] = c
		return n, err
	}
	return nil, fmt.Errorf("cannot descend into %T", node)
}

// TestWebhookReviewDetails: which requests are injected, the namespace a
// pod is judged in, and the response's apiVersion.
func TestWebhookReviewDetails(t *testing.T) {
	h := NewWebhookHandler(New(nil, Options{}), quietLogger())
	pod := seedPodJSON(t, nil)
	review := func(mod func(string) string) []byte {
		return []byte(mod(string(reviewJSON("admission.k8s.io/v1", "u", "default", pod))))
	}
	same := func(s string) string { return s }
	patched := func(body []byte, contentType string) (*admissionv1.AdmissionReview, bool) {
		r := decodeReview(t, post(h, contentType, body))
		if !r.Response.Allowed {
			t.Fatalf("refused: %+v", r.Response.Result)
		}
		return r, len(r.Response.Patch) > 0
	}
	if _, ok := patched(review(same), "application/json; charset=utf-8"); !ok {
		t.Error("a pod creation with a charset in the content type was not injected")
	}
	if _, ok := patched(review(func(s string) string {
		return strings.Replace(s, `"resource":{`, `"subResource":"status","resource":{`, 1)
	}), "application/json"); ok {
		t.Error("a subresource request was patched")
	}
	if _, ok := patched(review(func(s string) string { return strings.Replace(s, `"kind":{"group":""`, `"kind":{"group":"x.io"`, 1) }), "application/json"); ok {
		t.Error("a Pod of another API group was patched")
	}
	r, ok := patched([]byte(strings.Replace(string(review(same)), "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1)), "application/json")
	if !ok || r.APIVersion != "admission.k8s.io/v1beta1" || r.Kind != "AdmissionReview" || r.Response.UID != "u" {
		t.Errorf("v1beta1 review: %v %s %s", ok, r.APIVersion, r.Response.UID)
	}

	// The pod's own namespace wins over the request's.
	var asked []string
	h.NamespaceLabels = func(ns string) (map[string]string, bool) {
		asked = append(asked, ns)
		switch ns {
		case "on":
			return map[string]string{"istio-injection": "enabled"}, true
		case "nil":
			return nil, true // known, no labels
		}
		return nil, false // unknown: trust the webhook's selector
	}
	inNS := func(reqNS, podNS string) []byte {
		p := strings.Replace(string(pod), `"metadata":{`, `"metadata":{"namespace":"`+podNS+`",`, 1)
		if podNS == "" {
			p = string(pod)
		}
		return reviewJSON("admission.k8s.io/v1", "u", reqNS, []byte(p))
	}
	for _, tc := range []struct {
		reqNS, podNS string
		inject       bool
	}{
		{"default", "on", true},
		{"on", "nil", false},
		{"nil", "", false},
		{"unknown", "", true},
	} {
		asked = nil
		if _, ok := patched(inNS(tc.reqNS, tc.podNS), "application/json"); ok != tc.inject {
			t.Errorf("request ns %q, pod ns %q: injected %v, want %v (asked about %v)", tc.reqNS, tc.podNS, ok, tc.inject, asked)
		}
	}
}

// TestPodName: the webhook's log names a pod by its name, or by its
// generateName when the API server has not named it yet.
func TestPodName(t *testing.T) {
	cases := []struct {
		name, generateName, want string
	}{
		{"web-1", "web-", "web-1"},
		{"", "web-", "web-"},
		{"web-1", "", "web-1"},
	}
	for _, tc := range cases {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.name, GenerateName: tc.generateName}}
		if got := podName(p); got != tc.want {
			t.Errorf("podName(name %q, generateName %q) = %q, want %q", tc.name, tc.generateName, got, tc.want)
		}
	}
}
