package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const injectPod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: a}]}\n"

// TestKubeInjectHostile: kube-inject writes nothing when a document fails
// (no half manifest on a pipe into kubectl apply, no half output file),
// names the file and the document, refuses a mesh config straitd would
// refuse, and stops an endless input at its limit.
func TestKubeInjectHostile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.yaml", injectPod+"---\n"+strings.Replace(injectPod, "metadata: {name: p}", "metadata: {name: q, annotations: {sidecar.istio.io/proxyCPU: x}}", 1))
	outFile := filepath.Join(dir, "out.yaml")
	var stdout bytes.Buffer
	err := runKubeInject(nil, &stdout, kubeInjectFlags{filename: bad, output: outFile})
	if err == nil || !strings.HasPrefix(err.Error(), bad+`: document 2: Pod q: annotation sidecar.istio.io/proxyCPU: "x"`) {
		t.Errorf("error %v, want it to name the file and document 2", err)
	}
	if _, statErr := os.Stat(outFile); !errors.Is(statErr, fs.ErrNotExist) || stdout.Len() != 0 {
		t.Errorf("output written although document 2 failed: stat %v, stdout %q", statErr, stdout.String())
	}
	if err := runKubeInject(nil, &stdout, kubeInjectFlags{filename: bad}); err == nil || stdout.Len() != 0 {
		t.Errorf("stdout got %d bytes although document 2 failed (err %v)", stdout.Len(), err)
	}

	good := write("good.yaml", injectPod)
	if err := runKubeInject(nil, &stdout, kubeInjectFlags{filename: good, output: outFile}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(outFile); err != nil || !strings.Contains(string(b), "name: istio-proxy") {
		t.Errorf("output file: %v\n%s", err, b)
	}

	mesh := write("mesh.yaml", "enableEnvoyAccessLogService: true\n")
	if err := runKubeInject(nil, &stdout, kubeInjectFlags{filename: good, meshConfigFile: mesh}); err == nil || err.Error() != mesh+": mesh config: enableEnvoyAccessLogService: not supported by Strait yet" {
		t.Errorf("mesh config with a refused field: %v", err)
	}
	cm := write("inject.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio}\ndata: {mesh: ''}\n")
	if err := runKubeInject(nil, &stdout, kubeInjectFlags{filename: good, injectConfigFile: cm}); err == nil || !strings.Contains(err.Error(), "data.config: the ConfigMap has no config key") {
		t.Errorf("the istio ConfigMap as the injector config: %v", err)
	}

	err = runKubeInject(endless{}, &stdout, kubeInjectFlags{filename: "-"})
	if err == nil || stdout.Len() != 0 || !strings.HasPrefix(err.Error(), "-: ") || !strings.Contains(err.Error(), "larger than 16 MiB") {
		t.Errorf("endless stdin: %v", err)
	}
}

// TestLimitedReader: the input limit ends the read with an error and
// remembers why, rather than ending the input quietly at the limit.
func TestLimitedReader(t *testing.T) {
	l := &limitedReader{r: strings.NewReader("abcdef"), left: 4}
	b := make([]byte, 10)
	if n, err := l.Read(b); n != 4 || err != nil || string(b[:n]) != "abcd" || l.over {
		t.Fatalf("first read: %d %v %q over=%v", n, err, b[:n], l.over)
	}
	if n, err := l.Read(b); n != 0 || err == nil || !l.over {
		t.Fatalf("read past the limit: %d %v over=%v", n, err, l.over)
	}
	l = &limitedReader{r: strings.NewReader("ab"), left: 4}
	if n, _ := l.Read(b); n != 2 || l.over {
		t.Fatalf("short input: %d over=%v", n, l.over)
	}
}
