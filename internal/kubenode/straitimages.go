package kubenode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/straitmesh/strait/internal/images"
)

// StraitImages builds Strait's images as `make images` does (static
// binaries from this module, the proxy image with the build machine's
// iptables and ip) into dir, named HUB/NAME:TAG, and returns the tarball
// paths for Options.Images.
func StraitImages(ctx context.Context, dir, hub, tag string) ([]string, error) {
	binDir := filepath.Join(dir, "static")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "grpcnotrace", "-trimpath", "-o", binDir+"/", // the Makefile's GO_TAGS: the images ship these builds
		"github.com/straitmesh/strait/cmd/straitd", "github.com/straitmesh/strait/cmd/strait-agent",
		"github.com/straitmesh/strait/cmd/strait-proxy", "github.com/straitmesh/strait/cmd/strait-echo")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the static binaries for the images: %w: %s", err, strings.TrimSpace(string(out)))
	}
	host, err := images.HostFiles(ctx, images.HostOptions{Programs: images.HostPrograms, ExtraDirs: []string{images.XtablesDir}})
	if err != nil {
		return nil, err
	}
	scratch := filepath.Join(dir, "scratch")
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return nil, err
	}
	specs, err := images.Specs(images.Options{BinDir: binDir, Host: host}, scratch)
	if err != nil {
		return nil, err
	}
	return images.WriteAll(ctx, specs, images.WriteOptions{Hub: hub, Tag: tag, OutDir: filepath.Join(dir, "images")})
}
