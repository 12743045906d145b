package images

import (
	"context"
	"os"
	"path/filepath"
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
