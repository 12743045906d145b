package images

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestConformanceEchoSpec writes the echo-basic image and loads it back:
// tag, entrypoint, user and the binary at /echo-basic; a missing binary
// is refused with the command that builds it.
func TestConformanceEchoSpec(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "echo-basic")
	if err := os.WriteFile(bin, []byte("echo-basic"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec, err := ConformanceEchoSpec(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	paths, err := WriteAll(context.Background(), []Spec{spec}, WriteOptions{Hub: "strait", Tag: "conformance", OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 1 || filepath.Base(paths[0]) != ConformanceEchoName+".tar" {
		t.Fatalf("wrote %v, want one %s.tar", paths, ConformanceEchoName)
	}
	tag, err := name.NewTag("strait/" + ConformanceEchoName + ":conformance")
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(paths[0], &tag)
	if err != nil {
		t.Fatalf("load %s with tag %s: %v", paths[0], tag, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cf.Config.Entrypoint, " "); got != "/echo-basic" {
		t.Errorf("entrypoint %q, want /echo-basic", got)
	}
	if cf.Config.User != ConformanceEchoUser {
		t.Errorf("user %q, want %q", cf.Config.User, ConformanceEchoUser)
	}
	hdrs, content := entries(t, img)
	if content["/echo-basic"] != "echo-basic" {
		t.Errorf("/echo-basic holds %q, want the binary", content["/echo-basic"])
	}
	if h := hdrs["/echo-basic"]; h == nil || h.Mode&0o111 == 0 {
		t.Errorf("/echo-basic is not executable: %+v", h)
	}

	_, err = ConformanceEchoSpec(filepath.Join(t.TempDir(), "missing"), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "go build -o") {
		t.Errorf("missing binary: %v, want an error naming the build command", err)
	}
}

// TestConformanceEchoAdvancedSpec: Istio's echo layout (server as the
// entrypoint, client on PATH, the TLS pair at the paths the mesh
// manifests name), root, and each missing input refused by name.
func TestConformanceEchoAdvancedSpec(t *testing.T) {
	dir := t.TempDir()
	in := EchoAdvancedFiles{}
	for _, f := range []struct {
		dst  *string
		name string
	}{{&in.Server, "server"}, {&in.Client, "client"}, {&in.Cert, "cert.crt"}, {&in.Key, "cert.key"}} {
		*f.dst = filepath.Join(dir, f.name)
		if err := os.WriteFile(*f.dst, []byte(f.name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	spec, err := ConformanceEchoAdvancedSpec(in, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	img, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cf.Config.Entrypoint, " "); got != "/usr/local/bin/server" {
		t.Errorf("entrypoint %q, want /usr/local/bin/server", got)
	}
	if cf.Config.User != "" {
		t.Errorf("user %q, want root", cf.Config.User)
	}
	if !slices.ContainsFunc(cf.Config.Env, func(e string) bool {
		return strings.HasPrefix(e, "PATH=") && slices.Contains(strings.Split(strings.TrimPrefix(e, "PATH="), ":"), "/usr/local/bin")
	}) {
		t.Errorf("env %v: /usr/local/bin is not on PATH, so `client` is not found by exec", cf.Config.Env)
	}
	hdrs, content := entries(t, img)
	for p, want := range map[string]string{"/usr/local/bin/server": "server", "/usr/local/bin/client": "client", "/cert.crt": "cert.crt", "/cert.key": "cert.key"} {
		if content[p] != want {
			t.Errorf("%s holds %q, want %q", p, content[p], want)
		}
	}
	for _, p := range []string{"/usr/local/bin/server", "/usr/local/bin/client"} {
		if h := hdrs[p]; h == nil || h.Mode&0o111 == 0 {
			t.Errorf("%s is not executable: %+v", p, h)
		}
	}
	for _, missing := range []*string{&in.Server, &in.Client, &in.Cert, &in.Key} {
		saved := *missing
		*missing = filepath.Join(dir, "absent")
		if _, err := ConformanceEchoAdvancedSpec(in, t.TempDir()); err == nil || !strings.Contains(err.Error(), "istio-build.sh") {
			t.Errorf("missing input: %v, want an error naming the build script", err)
		}
		*missing = saved
	}
}
