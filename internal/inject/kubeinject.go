package inject

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/straitmesh/strait/internal/istioconfig"
)

// maxDocumentBytes bounds one YAML document of kube-inject's input.
const maxDocumentBytes = 16 << 20

// IntoResourceFile is kube-inject: it reads YAML documents from in and
// writes them to out, each followed by "---", with a sidecar injected into
// every Pod and into the pod template of every Deployment, StatefulSet,
// DaemonSet, ReplicaSet, Job, CronJob and ReplicationController, including
// those inside a List. Other kinds, and pods the policy skips, are written
// unchanged. An invalid document or annotation stops it with an error that
// starts with "document N: " and names the object and the annotation. At
// most maxDocumentBytes of one document is held in memory.
func (i *Injector) IntoResourceFile(in io.Reader, out io.Writer) error {
	r := newDocumentReader(in)
	for n := 1; ; {
		doc, line, err := r.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read YAML: %w", err)
		}
		if isBlankYAML(doc) {
			continue
		}
		res, err := i.injectDocument(doc, line)
		if err != nil {
			return fmt.Errorf("document %d: %w", n, err)
		}
		n++
		if _, err := out.Write(res); err != nil {
			return err
		}
		if !bytes.HasSuffix(res, []byte("\n")) {
			if _, err := io.WriteString(out, "\n"); err != nil {
				return err
			}
		}
		if _, err := io.WriteString(out, "---\n"); err != nil {
			return err
		}
	}
}

// documentSeparator ends a document: a "---" line (content after it
// starts the next document) or a "..." line (a document end marker), with
// an optional comment. The YAML decoder reads only the first document of
// what it is given, so a document must never reach it with another after.
var documentSeparator = regexp.MustCompile(`^(---|\.\.\.)(\s.*)?$`)

// documentReader splits a YAML stream into documents at "---" lines. It
// reads line by line and refuses a document (or a line) longer than
// maxDocumentBytes before holding more of it, so a huge or endless input
// costs bounded memory.
type documentReader struct {
	r       *bufio.Reader
	line    int    // lines read so far
	pending []byte // content of the last separator line, for the next document
}

func newDocumentReader(in io.Reader) *documentReader {
	return &documentReader{r: bufio.NewReaderSize(in, 64<<10)}
}

// errUTF16 refuses UTF-16 input, whose "---" lines the splitter cannot see.
var errUTF16 = errors.New("the input is UTF-16 (by its byte order mark); save it as UTF-8")

// next returns the next document and the line it starts on; io.EOF when
// the stream is done.
func (d *documentReader) next() ([]byte, int, error) {
	if d.line == 0 {
		if bom, _ := d.r.Peek(2); bytes.Equal(bom, []byte{0xff, 0xfe}) || bytes.Equal(bom, []byte{0xfe, 0xff}) {
			return nil, 0, errUTF16
		}
	}
	doc, start := d.pending, d.line+1
	if doc != nil {
		start = d.line
	}
	d.pending = nil
	for {
		line, err := d.readLine(maxDocumentBytes - len(doc))
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, fmt.Errorf("document from line %d: %w", start, err)
		}
		if len(line) > 0 {
			d.line++
			if documentSeparator.Match(bytes.TrimRight(line, "\r\n")) {
				if rest := separatorContent(line); rest != nil {
					// "--- {a: 1}" starts the next document on its line.
					d.pending = rest
				}
				return doc, start, nil
			}
			doc = append(doc, line...)
		}
		if errors.Is(err, io.EOF) {
			if len(doc) == 0 {
				return nil, 0, io.EOF
			}
			if doc[len(doc)-1] != '\n' {
				doc = append(doc, '\n')
			}
			return doc, start, nil
		}
	}
}

// separatorContent returns what follows "---" on a separator line when it
// is content (not blank, not a comment), as a line of its own; else nil.
func separatorContent(line []byte) []byte {
	rest := bytes.TrimSpace(line[3:])
	if line[0] != '-' || len(rest) == 0 || rest[0] == '#' {
		return nil
	}
	return append(rest, '\n')
}

// errDocumentTooLarge is the error of a document over maxDocumentBytes.
var errDocumentTooLarge = fmt.Errorf("larger than %d MiB; a Kubernetes object is at most 1.5 MiB", maxDocumentBytes>>20)

// readLine returns one line with its newline, or an error when it holds
// more than limit bytes.
func (d *documentReader) readLine(limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := d.r.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			return nil, errDocumentTooLarge
		}
		line = append(line, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

func isBlankYAML(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		t := strings.TrimSpace(line)
		if t != "" && !strings.HasPrefix(t, "#") && t != "---" {
			return false
		}
	}
	return true
}

// injectDocument injects one document; it returns the document as it came
// when there is nothing to inject.
// line is the input line the document starts on, for YAML errors.
func (i *Injector) injectDocument(doc []byte, line int) ([]byte, error) {
	// Strict, as kubectl is: a key written twice is an error rather than
	// the last one silently kept.
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, fmt.Errorf("parse YAML: %s", istioconfig.YAMLProblem(err, doc, line))
	}
	out, changed, err := i.injectJSON(js)
	if err != nil || !changed {
		return doc, err
	}
	return yaml.JSONToYAML(out)
}

// injectJSON injects one object in JSON form; changed is false when it
// was left alone.
func (i *Injector) injectJSON(js []byte) (out []byte, changed bool, err error) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		// Not an object (a scalar, a list at top level): not ours to touch.
		return js, false, nil
	}
	switch {
	case tm.Kind == "List" || strings.HasSuffix(tm.Kind, "List") && tm.APIVersion == "v1":
		return i.injectList(js)
	case tm.APIVersion == "v1" && tm.Kind == "Pod":
		return injectTyped(i, tm, js, func(p *corev1.Pod) (*metav1.ObjectMeta, *corev1.PodSpec, *metav1.ObjectMeta) {
			return &p.ObjectMeta, &p.Spec, &p.ObjectMeta
		})
	case tm.APIVersion == "v1" && tm.Kind == "ReplicationController":
		return injectTyped(i, tm, js, func(o *corev1.ReplicationController) (*metav1.ObjectMeta, *corev1.PodSpec, *metav1.ObjectMeta) {
			if o.Spec.Template == nil {
				o.Spec.Template = &corev1.PodTemplateSpec{}
			}
			return &o.ObjectMeta, &o.Spec.Template.Spec, &o.Spec.Template.ObjectMeta
		})
	case tm.APIVersion == "apps/v1" && tm.Kind == "Deployment":
		return injectTyped(i, tm, js, func(o *appsv1.Deployment) (*metav1.ObjectMeta, *corev1.PodSpec, *metav1.ObjectMeta) {
			return &o.ObjectMeta, &o.Spec.Template.Spec, &o.Spec.Template.ObjectMeta
		})
	case tm.APIVersion == "apps/v1" && tm.Kind == "StatefulSet":
		return injectTyped(i, tm, js, func(o *appsv1.StatefulSet) (*metav1.ObjectMeta, *corev1.PodSpec, *metav1.ObjectMeta) {
			return &o.ObjectMeta, &o.Spec.Template.Spec, &o.Spec.Template.ObjectMeta
		})
	case tm.APIVersion == "apps/v1" && tm.Kind == "DaemonSet":
		return injectTyped(i, tm, js, func(o *appsv1.DaemonSet) (*metav1.ObjectMeta, *corev1.PodSpec, *metav1.ObjectMeta) {
			return &o.ObjectMeta, &o.Spec.Template.Spec, &o.Spec.Template.ObjectMeta
		})
	case tm.APIVersion == "apps/v1" && tm.Kind == "ReplicaSet":
		return injectTyped(i, tm, js, func(o *appsv1.ReplicaSet) (*metav1.ObjectMeta, *corev1.PodSpec, *metav1.ObjectMeta) {
			return &o.ObjectMeta, &o.Spec.Template.Spec, &o.Spec.Template.ObjectMeta
		})
	case tm.APIVersion == "batch/v1" && tm.Kind == "Job":
		return injectTyped(i, tm, js, func(o *batchv1.Job) (*metav1.ObjectMeta, *corev1.PodSpec, *metav1.ObjectMeta) {
			return &o.ObjectMeta, &o.Spec.Template.Spec, &o.Spec.Template.ObjectMeta
		})
	case tm.APIVersion == "batch/v1" && tm.Kind == "CronJob":
		return injectTyped(i, tm, js, func(o *batchv1.CronJob) (*metav1.ObjectMeta, *corev1.PodSpec, *metav1.ObjectMeta) {
			return &o.ObjectMeta, &o.Spec.JobTemplate.Spec.Template.Spec, &o.Spec.JobTemplate.Spec.Template.ObjectMeta
		})
	}
	return js, false, nil
}

// injectList injects each item of a List; items are kept as raw JSON so
// the ones left alone come out as they went in.
func (i *Injector) injectList(js []byte) ([]byte, bool, error) {
	var list map[string]json.RawMessage
	if err := json.Unmarshal(js, &list); err != nil {
		return js, false, nil
	}
	var items []json.RawMessage
	if raw, ok := list["items"]; !ok || json.Unmarshal(raw, &items) != nil {
		return js, false, nil
	}
	changed := false
	for n, item := range items {
		out, ch, err := i.injectJSON(item)
		if err != nil {
			return nil, false, fmt.Errorf("List item %d: %w", n, err) //nolint:staticcheck // ST1005: List is the Kubernetes kind, as the user wrote it
		}
		if ch {
			items[n], changed = out, true
		}
	}
	if !changed {
		return js, false, nil
	}
	raw, err := json.Marshal(items)
	if err != nil {
		return nil, false, err
	}
	list["items"] = raw
	out, err := json.Marshal(list)
	return out, true, err
}

// injectTyped decodes js as T, injects the pod that parts points at (the
// object's meta, the pod spec and the pod's meta) and encodes the result.
func injectTyped[T any](i *Injector, tm metav1.TypeMeta, js []byte, parts func(*T) (obj *metav1.ObjectMeta, spec *corev1.PodSpec, podMeta *metav1.ObjectMeta)) ([]byte, bool, error) {
	obj := new(T)
	// Strict, as kubectl is: a misspelt or misindented field is an error
	// here, not a silently dropped part of the pod.
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		return nil, false, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	meta, spec, podMeta := parts(obj)
	pod := &corev1.Pod{ObjectMeta: *podMeta.DeepCopy(), Spec: *spec.DeepCopy()}
	if tm.Kind != "Pod" {
		pod.Namespace = meta.Namespace
	}
	res, err := i.Inject(Request{
		Pod:          pod,
		Namespace:    meta.Namespace,
		Workload:     tm,
		WorkloadMeta: metav1.ObjectMeta{Name: meta.Name, Namespace: meta.Namespace},
	})
	if err != nil {
		return nil, false, fmt.Errorf("%s %s: %w", tm.Kind, objectName(meta), err)
	}
	if res.Pod == nil {
		return js, false, nil
	}
	ns := podMeta.Namespace
	*podMeta = res.Pod.ObjectMeta
	podMeta.Namespace = ns
	*spec = res.Pod.Spec
	out, err := json.Marshal(obj)
	return out, true, err
}

func objectName(m *metav1.ObjectMeta) string {
	name := m.Name
	if name == "" {
		name = m.GenerateName
	}
	if m.Namespace != "" {
		return m.Namespace + "/" + name
	}
	return name
}
