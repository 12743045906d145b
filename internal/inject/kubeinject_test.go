package inject

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestIntoResourceFileEdges: documents kube-inject passes through or
// refuses, and how it names what it refuses.
func TestIntoResourceFileEdges(t *testing.T) {
	inj := New(DefaultSettings(), Options{})
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: ns\nspec:\n  containers:\n  - name: app\n    image: app\n"
	cases := []struct {
		name, in string
		injected int    // how many istio-proxy containers come out
		same     bool   // the output is the input, documents separated by ---
		err      string // error text, "" = none
	}{
		{"empty", "", 0, true, ""},
		{"only comments and separators", "# a\n---\n  # b\n---\n", 0, true, ""},
		{"scalar document", "hello\n", 0, true, ""},
		{"top-level list", "- a\n- b\n", 0, true, ""},
		{"other kind", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n", 0, true, ""},
		{"pod of another apiVersion", "apiVersion: v2\nkind: Pod\nmetadata: {name: p}\n", 0, true, ""},
		{"deployment of another apiVersion", "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: d}\n", 0, true, ""},
		// Each workload kind only in its own apiVersion, and no other kind
		// of that apiVersion.
		{"replication controller of another apiVersion", "apiVersion: v2\nkind: ReplicationController\nmetadata: {name: rc}\n", 0, true, ""},
		{"statefulset of another apiVersion", "apiVersion: apps/v1beta2\nkind: StatefulSet\nmetadata: {name: s}\n", 0, true, ""},
		{"daemonset of another apiVersion", "apiVersion: extensions/v1beta1\nkind: DaemonSet\nmetadata: {name: d}\n", 0, true, ""},
		{"replicaset of another apiVersion", "apiVersion: extensions/v1beta1\nkind: ReplicaSet\nmetadata: {name: r}\n", 0, true, ""},
		{"job of another apiVersion", "apiVersion: batch/v2\nkind: Job\nmetadata: {name: j}\n", 0, true, ""},
		{"cronjob of another apiVersion", "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: c}\n", 0, true, ""},
		{"other apps/v1 kind", "apiVersion: apps/v1\nkind: ControllerRevision\nmetadata: {name: c}\nrevision: 1\n", 0, true, ""},
		{"other batch/v1 kind", "apiVersion: batch/v1\nkind: JobSet\nmetadata: {name: j}\n", 0, true, ""},
		{"other v1 kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", 0, true, ""},
		{"pod", pod, 1, false, ""},
		{"pod without a trailing newline", strings.TrimSuffix(pod, "\n"), 1, false, ""},
		{"two pods", pod + "---\n" + pod, 2, false, ""},
		{"PodList", "apiVersion: v1\nkind: PodList\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(pod, "\n"), "\n", "\n  ") + "\n", 1, false, ""},
		{"List without items", "apiVersion: v1\nkind: List\n", 0, true, ""},
		{"List with bad items", "apiVersion: v1\nkind: List\nitems: 3\n", 0, true, ""},
		{"List with nothing to inject", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: s}}\n", 0, true, ""},
		{"XList of another apiVersion is no list", "apiVersion: x/v1\nkind: ThingList\nitems: []\n", 0, true, ""},
		{"misspelt field", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containres: []}\n", 0, false, `document 1: Pod: json: unknown field "containres"`},
		{"bad annotation names the object", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: shop}\nspec:\n  template:\n    metadata:\n      annotations: {sidecar.istio.io/proxyCPU: x}\n    spec: {containers: [{name: a, image: a}]}\n",
			0, false, `document 1: Deployment shop/d: annotation sidecar.istio.io/proxyCPU: "x" is not a CPU quantity (e.g. "500m")`},
		{"generated name", "apiVersion: v1\nkind: Pod\nmetadata: {generateName: g-, annotations: {sidecar.istio.io/proxyCPU: x}}\nspec: {containers: [{name: a, image: a}]}\n",
			0, false, `document 1: Pod g-: annotation sidecar.istio.io/proxyCPU: "x" is not a CPU quantity (e.g. "500m")`},
		{"bad item in a List", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service}\n- {apiVersion: v1, kind: Pod, metadata: {name: p, annotations: {sidecar.istio.io/proxyCPU: x}}, spec: {containers: [{name: a, image: a}]}}\n",
			0, false, `document 1: List item 1: Pod p: annotation sidecar.istio.io/proxyCPU: "x" is not a CPU quantity (e.g. "500m")`},
		{"not YAML", "a: [\n", 0, false, "document 1: parse YAML: "},
		{"replication controller without a template", "apiVersion: v1\nkind: ReplicationController\nmetadata: {name: rc}\n", 1, false, ""},
	}
	for _, tc := range cases {
		var out bytes.Buffer
		err := inj.IntoResourceFile(strings.NewReader(tc.in), &out)
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%s: error = %v, want %q...", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := out.String()
		if n := strings.Count(got, "name: "+ProxyContainerName+"\n"); n != tc.injected {
			t.Errorf("%s: %d proxies injected, want %d:\n%s", tc.name, n, tc.injected, got)
		}
		if tc.same {
			want := ""
			if !isBlankYAML([]byte(tc.in)) {
				want = tc.in + "---\n"
			}
			if got != want {
				t.Errorf("%s: output\n%q\nwant\n%q", tc.name, got, want)
			}
		}
		if tc.injected > 0 && (!strings.HasSuffix(got, "\n---\n") || strings.Count(got, "---\n") != strings.Count(tc.in, "---\n")+1) {
			t.Errorf("%s: documents not separated:\n%s", tc.name, got)
		}
	}
}

// failingWriter fails its failAt-th Write (counting from 1) and every one
// after it, having written what came before to buf.
type failingWriter struct {
	buf    bytes.Buffer
	calls  int
	failAt int
}

var errWriteFailed = errors.New("disk full")

func (w *failingWriter) Write(p []byte) (int, error) {
	w.calls++
	if w.calls >= w.failAt {
		return 0, errWriteFailed
	}
	return w.buf.Write(p)
}

// TestIntoResourceFileWrites: a document passed through without a final
// newline gets one before its "---", and a failing output stops
// kube-inject with the writer's error at each of its writes (the
// document, the separator; the YAML reader already ends the document
// with a newline, so the write of a missing one is never reached).
func TestIntoResourceFileWrites(t *testing.T) {
	inj := New(DefaultSettings(), Options{})
	svc := "apiVersion: v1\nkind: Service\nmetadata: {name: s}"
	var out bytes.Buffer
	if err := inj.IntoResourceFile(strings.NewReader(svc), &out); err != nil {
		t.Fatal(err)
	}
	if want := svc + "\n---\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	out.Reset()
	if err := inj.IntoResourceFile(strings.NewReader(svc+"\n---\n"+svc), &out); err != nil {
		t.Fatal(err)
	}
	if want := svc + "\n---\n" + svc + "\n---\n"; out.String() != want {
		t.Errorf("two documents: output %q, want %q", out.String(), want)
	}

	for failAt, wrote := range []string{1: "", 2: svc + "\n"} {
		if failAt == 0 {
			continue
		}
		w := &failingWriter{failAt: failAt}
		err := inj.IntoResourceFile(strings.NewReader(svc), w)
		if !errors.Is(err, errWriteFailed) {
			t.Errorf("write %d fails: IntoResourceFile = %v, want the writer's error", failAt, err)
		}
		if w.buf.String() != wrote || w.calls != failAt {
			t.Errorf("write %d fails: wrote %q in %d writes, want %q and no write after the failure", failAt, w.buf.String(), w.calls, wrote)
		}
	}
}
