package inject

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// oddWorkloads are the inputs kube-inject meets besides plain
// Deployments: a CronJob, a Job, a List, a hostNetwork pod, init
// containers, a pod that opted out, and an empty template.
var oddWorkloads = []string{
	"apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: cj, namespace: ns}\nspec:\n  schedule: '* * * * *'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: OnFailure\n          initContainers: [{name: init, image: busybox}]\n          containers: [{name: app, image: busybox}]\n",
	"apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: app, image: busybox}]\n",
	"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: a, image: a}]}}\n- {apiVersion: v1, kind: Service, metadata: {name: s}}\n",
	"apiVersion: v1\nkind: Pod\nmetadata: {name: hn}\nspec:\n  hostNetwork: true\n  containers: [{name: app, image: nginx}]\n",
	"apiVersion: v1\nkind: Pod\nmetadata: {name: out, annotations: {sidecar.istio.io/inject: 'false'}}\nspec: {containers: [{name: a, image: a}]}\n",
	"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {template: null}\n",
	"apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\nspec:\n  template:\n    metadata: {annotations: {proxy.istio.io/config: 'concurrency: 2', sidecar.istio.io/proxyCPU: 500m}}\n    spec: {containers: [{name: a, image: a, ports: [{containerPort: 80}]}]}\n",
	"--- {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: a, image: a}]}}\n",
}

// FuzzKubeInject feeds kube-inject arbitrary YAML streams. Whatever the
// input it must not panic; an error names the document (or the reading);
// on success no document is lost, and injecting the output again changes
// nothing (an injected pod is never injected twice).
func FuzzKubeInject(f *testing.F) {
	for _, s := range oddWorkloads {
		f.Add([]byte(s))
	}
	for _, pattern := range []string{"testdata/inject/*.yaml", "testdata/inject/*.injected", "testdata/seed/*.yaml"} {
		paths, _ := filepath.Glob(pattern)
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil && !bytes.HasPrefix(b, []byte("error:")) {
				f.Add(b)
			}
		}
	}
	inj := New(DefaultSettings(), Options{})
	errShape := regexp.MustCompile(`^(document \d+: |read YAML: )`)
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		if err := inj.IntoResourceFile(bytes.NewReader(in), &out); err != nil {
			if !errShape.MatchString(err.Error()) {
				t.Fatalf("error does not name the document: %v", err)
			}
			return
		}
		docs := 0
		r := newDocumentReader(bytes.NewReader(in))
		for {
			doc, _, err := r.next()
			if err != nil {
				break
			}
			if !isBlankYAML(doc) {
				docs++
			}
		}
		if got := strings.Count(out.String(), "\n---\n") + boolInt(strings.HasPrefix(out.String(), "---\n")); got != docs {
			t.Fatalf("%d documents in, %d out:\n%s", docs, got, out.String())
		}
		var again bytes.Buffer
		if err := inj.IntoResourceFile(bytes.NewReader(out.Bytes()), &again); err != nil {
			t.Fatalf("the output does not inject again: %v\n%s", err, out.String())
		}
		if again.String() != out.String() {
			t.Fatalf("injecting the output again changed it:\n%s\n---- again ----\n%s", out.String(), again.String())
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// FuzzSettings fuzzes the injector config, values and mesh config files:
// parsing and building settings must not panic, and settings that build
// must inject a plain pod or refuse it with an error.
func FuzzSettings(f *testing.F) {
	read := func(p string) string {
		b, _ := os.ReadFile(p)
		return string(b)
	}
	f.Add("", "", "")
	f.Add("policy: disabled\nalwaysInjectSelector: [{matchLabels: {a: b}}]\n", read("testdata/settings/values.yaml"), read("testdata/settings/mesh.yaml"))
	f.Add(read("testdata/settings/config-disabled.yaml"), "global: {proxy: {image: x, resources: {requests: {cpu: 1}}}}\n", "defaultConfig: {concurrency: 2}\n")
	f.Add("templates: {sidecar: '{{ .Values.global.proxy.image }}'}\n", "global: {proxy: []}\n", "")
	f.Add("neverInjectSelector: [{matchExpressions: [{key: a, operator: In}]}]\n", "global: 3\n", "trustDomain: [x]\n")
	pod := []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec: {containers: [{name: a, image: a}]}\n")
	f.Fuzz(func(t *testing.T, cfgYAML, valuesYAML, meshYAML string) {
		cfg, err := ParseConfig([]byte(cfgYAML))
		if err != nil {
			return
		}
		values, err := ParseValues([]byte(valuesYAML))
		if err != nil {
			return
		}
		mesh, err := ParseMeshConfig([]byte(meshYAML))
		if err != nil {
			return
		}
		s, err := NewSettings(cfg, values, mesh)
		if err != nil {
			return
		}
		var out bytes.Buffer
		_ = New(s, Options{}).IntoResourceFile(bytes.NewReader(pod), &out)
	})
}
