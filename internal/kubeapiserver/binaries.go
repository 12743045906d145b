package kubeapiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Versions of the binaries the test environment runs. The build script
// (hack/kube-testenv-build.sh) takes the same defaults.
const (
	KubeVersion = "v1.37.2"
	EtcdVersion = "v3.7.3"
)

// Environment variables that steer where the binaries come from.
const (
	// EnvBinDir names a directory that already holds kube-apiserver and
	// etcd; nothing is built when it is set.
	EnvBinDir = "STRAIT_KUBE_BIN_DIR"
	// EnvCache is the root of the per-version build cache
	// (default: the user cache dir + /strait/kube).
	EnvCache = "STRAIT_KUBE_CACHE"
	// EnvRequired, when "1" or "true", turns "cannot build the binaries"
	// from a skip into a test failure (set it in CI).
	EnvRequired = "STRAIT_KUBE_TESTENV_REQUIRED"
)

const buildScript = "hack/kube-testenv-build.sh"

// ErrUnavailable wraps every reason why the binaries cannot be had.
var ErrUnavailable = errors.New("kube test environment unavailable")

var buildMu sync.Mutex // one build per process; flock guards across processes

// BinDir returns the cache directory that holds (or will hold) the binaries
// of KubeVersion.
func BinDir() (string, error) {
	if d := os.Getenv(EnvBinDir); d != "" {
		return d, nil
	}
	root := os.Getenv(EnvCache)
	if root == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("%w: no cache dir: %v", ErrUnavailable, err)
		}
		root = filepath.Join(c, "strait", "kube")
	}
	return filepath.Join(root, KubeVersion, "bin"), nil
}

// Binaries returns the directory holding the kube-apiserver and etcd
// binaries, building them with hack/kube-testenv-build.sh (found by walking
// up from the working directory) when they are missing. The build's
// progress is written to progress. A cached build returns at once.
func Binaries(ctx context.Context, progress io.Writer) (string, error) {
	return binaries(ctx, progress, apiBinaries)
}

// NodeBinaries is Binaries for a one-node cluster: it also needs kube-node
// (kubelet, kube-controller-manager, kube-scheduler and kube-proxy in one
// multi-call binary, with a symlink per command).
func NodeBinaries(ctx context.Context, progress io.Writer) (string, error) {
	return binaries(ctx, progress, nodeBinaries)
}

var (
	apiBinaries  = []string{"kube-apiserver", "etcd"}
	nodeBinaries = []string{"kube-apiserver", "etcd", "kube-node", "kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy"}
)

func binaries(ctx context.Context, progress io.Writer, names []string) (string, error) {
	dir, err := BinDir()
	if err != nil {
		return "", err
	}
	if haveBinaries(dir, names) {
		return dir, nil
	}
	if os.Getenv(EnvBinDir) != "" {
		return "", fmt.Errorf("%w: $%s=%s lacks one of %s", ErrUnavailable, EnvBinDir, dir, strings.Join(names, ", "))
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if haveBinaries(dir, names) {
		return dir, nil
	}
	script, err := findScript()
	if err != nil {
		return "", err
	}
	if _, err := exec.LookPath("go"); err != nil {
		return "", fmt.Errorf("%w: building kube-apiserver needs the go command: %v", ErrUnavailable, err)
	}
	if progress == nil {
		progress = io.Discard
	}
	fmt.Fprintf(progress, "testenv/kube: Kubernetes %s (%s) and etcd %s are not all in %s; building them with %s (several minutes, once per version)\n",
		KubeVersion, strings.Join(names, ", "), EtcdVersion, dir, script)
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Env = append(os.Environ(), "STRAIT_KUBE_VERSION="+KubeVersion, "STRAIT_ETCD_VERSION="+EtcdVersion)
	var tail tailBuffer
	cmd.Stderr = io.MultiWriter(progress, &tail)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: %s failed: %v\n%s", ErrUnavailable, script, err, tail.String())
	}
	if !haveBinaries(dir, names) {
		return "", fmt.Errorf("%w: %s finished but %s lacks the binaries (stdout: %s)", ErrUnavailable, script, dir, strings.TrimSpace(out.String()))
	}
	return dir, nil
}

func haveBinaries(dir string, names []string) bool {
	for _, b := range names {
		fi, err := os.Stat(filepath.Join(dir, b))
		if err != nil || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// findScript walks up from the working directory to the module root.
func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	for {
		p := filepath.Join(dir, buildScript)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w: %s not found above the working directory; set $%s to a directory with kube-apiserver and etcd",
				ErrUnavailable, buildScript, EnvBinDir)
		}
		dir = parent
	}
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 4096 {
		t.buf = t.buf[len(t.buf)-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
