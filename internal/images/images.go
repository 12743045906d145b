package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ProxyUID is the user the sidecar runs as: the injected pod's
// istio-proxy container uses 1337 and the capture rules exempt its
// traffic by that owner (Istio's fixed proxy UID).
const ProxyUID = 1337

// BinDir is where the images keep Strait's binaries.
const BinDir = "/usr/local/bin"

// Spec describes one image.
type Spec struct {
	// Name is the repository name without hub, e.g. "straitd".
	Name       string
	Files      []File
	Entrypoint []string
	// User is "UID" or "UID:GID"; empty is root.
	User string
	Env  []string
}

// Build assembles spec as a one-layer linux image for the build
// machine's architecture.
func Build(spec Spec) (v1.Image, error) {
	layer, err := buildLayer(spec.Files)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", spec.Name, err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", spec.Name, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = runtime.GOARCH
	cf.Created = v1.Time{Time: epoch}
	cf.Config = v1.Config{
		Entrypoint: spec.Entrypoint,
		User:       spec.User,
		Env:        append([]string{"PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, spec.Env...),
		WorkingDir: "/",
		Labels:     map[string]string{"org.opencontainers.image.source": "https://github.com/straitmesh/strait"},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", spec.Name, err)
	}
	return img, nil
}

// Options configure Specs.
type Options struct {
	// BinDir holds the static Go binaries: straitd, strait-agent,
	// strait-proxy, strait-echo.
	BinDir string
	// Host are the files of the programs the init container runs
	// (HostFiles); required for the proxy image.
	Host []File
}

// baseFiles are what every image has besides its binaries: /tmp and a
// passwd/group naming root and istio-proxy (1337), so tools that look up
// the user find one.
func baseFiles(dir string) ([]File, error) {
	passwd := filepath.Join(dir, "passwd")
	group := filepath.Join(dir, "group")
	if err := os.WriteFile(passwd, []byte("root:x:0:0:root:/root:/sbin/nologin\nistio-proxy:x:1337:1337::/tmp:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(group, []byte("root:x:0:\nistio-proxy:x:1337:\nnogroup:x:65534:\n"), 0o644); err != nil {
		return nil, err
	}
	return []File{
		{Path: "/tmp", Mode: 0o777 | os.ModeSticky},
		{Path: "/etc/passwd", Src: passwd, Mode: 0o644},
		{Path: "/etc/group", Src: group, Mode: 0o644},
	}, nil
}

// Specs returns the straitd, proxy and strait-echo images. scratch is a
// directory for generated files (passwd); it must outlive the Build calls.
func Specs(opts Options, scratch string) ([]Spec, error) {
	base, err := baseFiles(scratch)
	if err != nil {
		return nil, err
	}
	bin := func(name string) (File, error) {
		src := filepath.Join(opts.BinDir, name)
		if _, err := os.Stat(src); err != nil {
			return File{}, fmt.Errorf("binary %s: %w (build it first: CGO_ENABLED=0 go build -o %s ./cmd/%s)", name, err, opts.BinDir, name)
		}
		return File{Path: BinDir + "/" + name, Src: src, Mode: 0o755}, nil
	}
	files := func(names ...string) ([]File, error) {
		out := append([]File(nil), base...)
		for _, n := range names {
			f, err := bin(n)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		}
		return out, nil
	}
	straitd, err := files("straitd")
	if err != nil {
		return nil, err
	}
	echo, err := files("strait-echo")
	if err != nil {
		return nil, err
	}
	proxy, err := files("strait-agent", "strait-proxy")
	if err != nil {
		return nil, err
	}
	if len(opts.Host) == 0 {
		return nil, fmt.Errorf("proxy image: no iptables/ip files (Options.Host from HostFiles)")
	}
	proxy = append(proxy, opts.Host...)
	// Istio's proxyv2 keeps the agent's files under /etc/istio/proxy,
	// writable by the proxy user.
	proxy = append(proxy, File{Path: "/etc/istio/proxy", UID: ProxyUID, GID: ProxyUID})
	return []Spec{
		{Name: "straitd", Files: straitd, Entrypoint: []string{BinDir + "/straitd"}, User: "65534:65534"},
		{Name: "proxy", Files: proxy, Entrypoint: []string{BinDir + "/strait-agent"},
			User: fmt.Sprintf("%d:%d", ProxyUID, ProxyUID), Env: []string{"XTABLES_LIBDIR=" + XtablesDir}},
		{Name: "strait-echo", Files: echo, Entrypoint: []string{BinDir + "/strait-echo"}, User: "65534:65534"},
	}, nil
}

// WriteOptions configure WriteAll.
type WriteOptions struct {
	// Hub and Tag name the images hub/NAME:tag (Istio's global.hub and
	// global.tag).
	Hub, Tag string
	// OutDir receives NAME.tar per image.
	OutDir string
}

// WriteAll builds every spec and writes it to OutDir/NAME.tar, returning
// the paths.
func WriteAll(ctx context.Context, specs []Spec, opts WriteOptions) ([]string, error) {
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, s := range specs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		img, err := Build(s)
		if err != nil {
			return nil, err
		}
		ref, err := name.NewTag(opts.Hub + "/" + s.Name + ":" + opts.Tag)
		if err != nil {
			return nil, fmt.Errorf("image name %s/%s:%s (hub %q, tag %q): %w", opts.Hub, s.Name, opts.Tag, opts.Hub, opts.Tag, err)
		}
		p := filepath.Join(opts.OutDir, s.Name+".tar")
		if err := tarball.WriteToFile(p, ref, img); err != nil {
			return nil, fmt.Errorf("write %s: %w", p, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}
