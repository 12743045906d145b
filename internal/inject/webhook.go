package inject

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AdmissionReview API versions the webhook speaks. Their JSON is the same
// shape; the response carries the request's version.
const (
	admissionV1      = "admission.k8s.io/v1"
	admissionV1beta1 = "admission.k8s.io/v1beta1"
	// MaxReviewBytes bounds a request body. The API server's own limit
	// for an object is about 3 MiB; a review holds one object (twice for
	// updates).
	MaxReviewBytes = 8 << 20
)

// Webhook is the /inject handler: it takes an AdmissionReview for a pod
// CREATE and answers with a JSONPatch that injects the sidecar, an
// allowed response without a patch when the policy skips the pod, or a
// refusal naming the invalid annotation. Malformed requests get 4xx; the
// handler never panics the process.
type Webhook struct {
	inj *Injector
	log *slog.Logger
	// NamespaceLabels, when set, returns a namespace's labels (a lister
	// from an informer) so the policy can read istio-injection itself.
	// Nil trusts the API server: the webhook's namespaceSelector already
	// chose the namespace. Set it before serving.
	NamespaceLabels func(namespace string) (map[string]string, bool)
}

// NewWebhookHandler returns the /inject handler for inj. A nil log is
// slog.Default().
func NewWebhookHandler(inj *Injector, log *slog.Logger) *Webhook {
	if log == nil {
		log = slog.Default()
	}
	return &Webhook{inj: inj, log: log.With("component", "inject-webhook")}
}

var _ http.Handler = (*Webhook)(nil)

// httpError is a request we cannot answer with an AdmissionReview.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func (w *Webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	defer func() {
		// Belt and braces: a bug must cost one request, not the process
		// that also serves xDS. The fuzz test treats a 500 as a failure.
		if p := recover(); p != nil {
			w.log.Error("panic while serving injection request", "panic", fmt.Sprint(p))
			http.Error(rw, "internal error", http.StatusInternalServerError)
		}
	}()
	if r.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		http.Error(rw, "use POST with an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(rw, fmt.Sprintf("content type %q is not application/json", r.Header.Get("Content-Type")), http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxReviewBytes+1))
	if err != nil {
		http.Error(rw, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > MaxReviewBytes {
		http.Error(rw, fmt.Sprintf("body is larger than %d bytes", MaxReviewBytes), http.StatusRequestEntityTooLarge)
		return
	}
	out, err := w.Review(body)
	if err != nil {
		code := http.StatusBadRequest
		var he *httpError
		if errors.As(err, &he) {
			code = he.code
		}
		w.log.Warn("bad injection request", "remote", r.RemoteAddr, "error", err)
		http.Error(rw, err.Error(), code)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	_, _ = rw.Write(out)
}

// Review answers one AdmissionReview (JSON). An error means the review
// itself is malformed (HTTP 400); a pod that must be refused is a normal
// response with allowed: false.
func (w *Webhook) Review(body []byte) ([]byte, error) {
	var review admissionv1.AdmissionReview
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&review); err != nil {
		return nil, &httpError{http.StatusBadRequest, "malformed AdmissionReview: " + err.Error()}
	}
	if review.Kind != "AdmissionReview" {
		return nil, &httpError{http.StatusBadRequest, fmt.Sprintf("malformed AdmissionReview: kind %q is not AdmissionReview", review.Kind)}
	}
	if review.APIVersion != admissionV1 && review.APIVersion != admissionV1beta1 {
		return nil, &httpError{http.StatusBadRequest, fmt.Sprintf("malformed AdmissionReview: apiVersion %q is not %s or %s", review.APIVersion, admissionV1, admissionV1beta1)}
	}
	if review.Request == nil {
		return nil, &httpError{http.StatusBadRequest, "malformed AdmissionReview: no request"}
	}
	if review.Request.UID == "" {
		return nil, &httpError{http.StatusBadRequest, "malformed AdmissionReview: request.uid is empty"}
	}
	resp := w.admit(review.Request)
	resp.UID = review.Request.UID
	return json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: review.APIVersion, Kind: "AdmissionReview"},
		Response: resp,
	})
}

func (w *Webhook) admit(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	allowed := &admissionv1.AdmissionResponse{Allowed: true}
	if req.Kind.Group != "" || req.Kind.Kind != "Pod" || req.Operation != admissionv1.Create || req.SubResource != "" {
		// Not a pod creation: not ours to change.
		return allowed
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return refuse(http.StatusBadRequest, fmt.Sprintf("request.object is not a pod: %v", err))
	}
	ns := req.Namespace
	if pod.Namespace != "" {
		ns = pod.Namespace
	}
	ir := Request{Pod: &pod, Namespace: ns}
	if w.NamespaceLabels != nil {
		if l, ok := w.NamespaceLabels(ns); ok {
			ir.NamespaceLabels = l
			if ir.NamespaceLabels == nil {
				ir.NamespaceLabels = map[string]string{}
			}
		}
	}
	log := w.log.With("namespace", ns, "pod", podName(&pod), "uid", string(req.UID))
	res, err := w.inj.Inject(ir)
	if err != nil {
		log.Info("pod refused", "error", err)
		return refuse(http.StatusBadRequest, err.Error())
	}
	if res.Pod == nil {
		log.Debug("pod not injected", "reason", res.Skipped)
		return allowed
	}
	patch, err := createPatch(&pod, res.Pod)
	if err != nil {
		log.Error("create patch", "error", err)
		return refuse(http.StatusInternalServerError, "create patch: "+err.Error())
	}
	log.Info("pod injected")
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
}

func refuse(code int32, msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{
		Allowed: false,
		Result:  &metav1.Status{Status: metav1.StatusFailure, Code: code, Message: msg},
	}
}

// createPatch is the RFC 6902 patch from the pod as the API server sent it
// to the injected pod, both in the same (typed) JSON form, so the patch
// holds only what injection changed.
func createPatch(before, after *corev1.Pod) ([]byte, error) {
	a, err := json.Marshal(before)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(after)
	if err != nil {
		return nil, err
	}
	ops, err := jsonpatch.CreatePatch(a, b)
	if err != nil {
		return nil, err
	}
	return json.Marshal(ops)
}

func podName(p *corev1.Pod) string {
	if p.Name != "" {
		return p.Name
	}
	return p.GenerateName
}
