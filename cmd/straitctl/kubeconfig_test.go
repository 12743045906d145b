package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "kubeconfig")
	kc := `apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster: {server: "` + server + `"}
users:
- name: admin
  user: {token: abc}
contexts:
- name: lab-admin
  context: {cluster: lab, user: admin}
- name: other
  context: {cluster: lab, user: admin}
current-context: lab-admin
`
	if err := os.WriteFile(f, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestKubeconfigErrors: install and uninstall with no usable cluster fail
// at once with a message naming the kubeconfig, the context and the
// server, and what to do, not with the first object's failure.
func TestKubeconfigErrors(t *testing.T) {
	server := "https://" + closedPort(t)
	kc := writeKubeconfig(t, server)
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"missing --kubeconfig", []string{"--kubeconfig", missing}, []string{"--kubeconfig " + missing, "no such file"}},
		{"empty kubeconfig", []string{"--kubeconfig", empty}, []string{"no kubeconfig", empty, "--kubeconfig FILE"}},
		{"server down", []string{"--kubeconfig", kc}, []string{"cannot reach the API server " + server, "context lab-admin", "kubeconfig " + kc, "connection refused"}},
		{"chosen context", []string{"--kubeconfig", kc, "--context", "other"}, []string{"context other of kubeconfig"}},
		{"unknown context", []string{"--kubeconfig", kc, "--context", "nope"}, []string{`has no context "nope"`, "--context", "it has lab-admin, other"}},
	} {
		for _, verb := range []string{"install", "uninstall"} {
			t.Run(tc.name+"/"+verb, func(t *testing.T) {
				out, err := runStraitctl(t, append([]string{verb}, tc.args...)...)
				if err == nil {
					t.Fatalf("%s %v succeeded:\n%s", verb, tc.args, out)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s %v: error %q, want it to contain %q", verb, tc.args, err, w)
					}
				}
				if out != "" {
					t.Errorf("%s printed progress before failing:\n%s", verb, out)
				}
			})
		}
	}
}

// TestNoKubeconfig: with $KUBECONFIG naming files that do not exist, the
// error lists them.
func TestNoKubeconfig(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	t.Setenv("KUBECONFIG", a+string(os.PathListSeparator)+b)
	_, err := runStraitctl(t, "install")
	if err == nil || !strings.Contains(err.Error(), "no kubeconfig: looked for "+a+", "+b+": not found") {
		t.Errorf("install with KUBECONFIG=%s:%s (missing): err %v, want both files named", a, b, err)
	}
}
