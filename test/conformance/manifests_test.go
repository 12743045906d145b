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

// echoAdvancedImageRE matches the mesh manifests' backend, Istio's echo.
var echoAdvancedImageRE = regexp.MustCompile(`registry\.k8s\.io/gateway-api/echo-advanced:[^\s"']+`)

// echoImages are the backends' images the harness built.
type echoImages struct {
	// Basic replaces echo-basic.
	Basic string
	// Advanced replaces echo-advanced; empty when no MESH profile runs,
	// and then the mesh manifests are left as they are (the suite applies
	// them only for the MESH profiles).
	Advanced string
}

// dropImages are images of the suite's manifests that no test of the
// profiles run here uses and that cannot be built here: the documents
// (Deployments) that run them are left out, so the namespaces they live
// in become ready. CoreDNS answers the UDPRoute tests (GATEWAY-UDP).
var dropImages = []string{"registry.k8s.io/coredns/coredns:"}

// meshOnly is the directory of the manifests only the MESH profiles
// apply.
const meshOnly = "mesh/"

// rewriteManifests copies the suite's manifests (every YAML file of
// upstream.Manifests) into memory, with the echo backends' images replaced
// by img's and the documents that run an image of dropImages left out. It
// refuses a manifest that still names another image of a registry, but
// for the mesh manifests (meshOnly) when img has no echo-advanced: they
// are applied only for the MESH profiles.
func rewriteManifests(src fs.FS, img echoImages) (fstest.MapFS, error) {
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
			data = rewriteStream(data, img)
			if strings.HasPrefix(path, meshOnly) && img.Advanced == "" {
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
func rewriteStream(data []byte, img echoImages) []byte {
	docs := bytes.Split(data, []byte("\n---\n"))
	kept := docs[:0]
	for _, doc := range docs {
		drop := false
		for _, i := range dropImages {
			if bytes.Contains(doc, []byte(i)) {
				drop = true
			}
		}
		if drop {
			continue
		}
		doc = echoImageRE.ReplaceAll(doc, []byte(img.Basic))
		if img.Advanced != "" {
			doc = echoAdvancedImageRE.ReplaceAll(doc, []byte(img.Advanced))
		}
		kept = append(kept, doc)
	}
	return bytes.Join(kept, []byte("\n---\n"))
}

// TestRewriteManifests: every image the suite's manifests name is the
// built echo image afterwards, the CoreDNS Deployment is gone and the rest
// of the base manifests is intact (their Gateways and backends).
func TestRewriteManifests(t *testing.T) {
	const img = "strait/gateway-echo-basic:conformance"
	m, err := rewriteManifests(&upstream.Manifests, echoImages{Basic: img})
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
	if _, err := rewriteManifests(fstest.MapFS{"x.yaml": {Data: []byte("image: registry.k8s.io/gateway-api/echo-advanced:v1\n")}}, echoImages{Basic: img}); err == nil {
		t.Error("echo-advanced was accepted; want an error naming it")
	}

	// With echo-advanced built (a MESH run), the mesh manifests name it
	// and nothing else.
	const adv = "strait/gateway-echo-advanced:conformance"
	m, err = rewriteManifests(&upstream.Manifests, echoImages{Basic: img, Advanced: adv})
	if err != nil {
		t.Fatal(err)
	}
	mesh := string(m[meshOnly+"manifests.yaml"].Data)
	if n := strings.Count(mesh, "image: "+adv); n < 3 {
		t.Errorf("mesh manifests name %s %d times, want each echo Deployment's (3 or more):\n%s", adv, n, mesh)
	}
	if strings.Contains(mesh, "registry.k8s.io") {
		t.Error("the mesh manifests still name a registry image")
	}
}
