package kubenode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/straitmesh/strait/internal/images"
)

// PauseImage is the sandbox image the node's containerd runs for every
// pod, built from ./pause and imported before the kubelet starts. Its
// registry name is one no registry serves, so a missing import shows as a
// failed pull of this name rather than a download from elsewhere.
const PauseImage = "strait.local/pause:test"

const pausePackage = "github.com/straitmesh/strait/internal/kubenode/pause"

// buildPauseImage compiles the pause program (static) and writes it as a
// one-file image tarball named PauseImage into dir; it returns the path.
func buildPauseImage(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "pause")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, pausePackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the pause program (%s): %w: %s", pausePackage, err, strings.TrimSpace(string(out)))
	}
	img, err := images.Build(images.Spec{
		Name:       "pause",
		Files:      []images.File{{Path: "/pause", Src: bin, Mode: 0o755}},
		Entrypoint: []string{"/pause"},
		User:       "65535:65535",
	})
	if err != nil {
		return "", err
	}
	ref, err := name.NewTag(PauseImage)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "pause.tar")
	if err := tarball.WriteToFile(path, ref, img); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}
