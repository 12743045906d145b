package conformance

import (
	"bytes"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	upstream "sigs.k8s.io/gateway-api/conformance"
)

// echoImageRE matches the echo backend's image in the suite's manifests,
// whatever release tag they name (the suite mixes several).
var echoImageRE = regexp.MustCompile(`registry\.k8s\.io/gateway-api/echo-basic:[^\s"']+`)

// dropImages are images of the suite's manifests that no test of the
// profiles run here uses and that cannot be built here: the documents
// (Deployments) that run them are left out, so the namespaces they live
// in become ready. CoreDNS answers the UDPRoute tests (GATEWAY-UDP).
var dropImages = []string{"registry.k8s.io/coredns/coredns:"}

// meshOnly is the directory of the manifests only the MESH profiles
// apply.
const meshOnly = "mesh/"

// rewriteManifests copies the suite's manifests (every YAML file of
// upstream.Manifests) into memory, with the echo backend's image replaced
// by image and the documents that run an image of dropImages left out.
// It refuses a manifest that still names another image of a registry,
// but for the mesh manifests (meshOnly): their backend is echo-advanced
// (Istio's echo), not built here, and they are applied only for the
// MESH profiles, which the harness does not run (meshProfileReason).
func rewriteManifests(src fs.FS, image string) (fstest.MapFS, error) {
	out := fstest.MapFS{}
	err := fs.WalkDir(src, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(src, path)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, ".yaml") {
			data = rewriteStream(data, image)
			if strings.HasPrefix(path, meshOnly) {
				out[path] = &fstest.MapFile{Data: data, Mode: 0o644}
				return nil
			}
			if m := regexp.MustCompile(`image:\s*\S*registry\.k8s\.io\S*`).Find(data); m != nil {
				return fmt.Errorf("%s: %s cannot be pulled here and is not rewritten", path, m)
			}
		}
		out[path] = &fstest.MapFile{Data: data, Mode: 0o644}
		return nil
	})
	return out, err
}

// rewriteStream rewrites one YAML stream (documents separated by ---
// lines).
func rewriteStream(data []byte, image string) []byte {
	docs := bytes.Split(data, []byte("\n---\n"))
	kept := docs[:0]
	for _, doc := range docs {
		drop := false
		for _, img := range dropImages {
			if bytes.Contains(doc, []byte(img)) {
				drop = true
			}
		}
		if !drop {
			kept = append(kept, echoImageRE.ReplaceAll(doc, []byte(image)))
		}
	}
	return bytes.Join(kept, []byte("\n---\n"))
}

// TestRewriteManifests: every image the suite's manifests name is the
// built echo image afterwards, the CoreDNS Deployment is gone and the rest
// of the base manifests is intact (their Gateways and backends).
func TestRewriteManifests(t *testing.T) {
	const img = "strait/gateway-echo-basic:conformance"
	m, err := rewriteManifests(&upstream.Manifests, img)
	if err != nil {
		t.Fatal(err)
	}
	base := string(m["base/manifests.yaml"].Data)
	if base == "" {
		t.Fatal("no base/manifests.yaml in the rewritten manifests")
	}
	for _, want := range []string{"name: infra-backend-v1", "name: same-namespace", "name: tcp-backend", "image: " + img} {
		if !strings.Contains(base, want) {
			t.Errorf("base manifests lost %q", want)
		}
	}
	if strings.Contains(base, "coredns/coredns") || strings.Contains(base, "kind: Deployment\nmetadata:\n  name: coredns") {
		t.Error("the CoreDNS Deployment is still in the base manifests")
	}
	images := 0
	for path, f := range m {
		for _, line := range strings.Split(string(f.Data), "\n") {
			if s := strings.TrimSpace(line); strings.HasPrefix(s, "image:") && !strings.HasPrefix(path, meshOnly) {
				images++
				if strings.TrimSpace(strings.TrimPrefix(s, "image:")) != img {
					t.Errorf("%s: %s, want %s", path, s, img)
				}
			}
		}
	}
	if images < 10 {
		t.Errorf("%d images rewritten, want the suite's backends (more than 10)", images)
	}
	// A manifest naming an image the harness cannot build is refused.
	if _, err := rewriteManifests(fstest.MapFS{"x.yaml": {Data: []byte("image: registry.k8s.io/gateway-api/echo-advanced:v1\n")}}, img); err == nil {
		t.Error("echo-advanced was accepted; want an error naming it")
	}
}
