package images

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"golang.org/x/sys/unix"

	"github.com/straitmesh/strait/internal/netns"
	"github.com/straitmesh/strait/internal/testreq"
)

// fakeBins writes stand-ins for the Go binaries (content = their name).
func fakeBins(t *testing.T) string {
	dir := t.TempDir()
	for _, n := range []string{"straitd", "strait-agent", "strait-proxy", "strait-echo"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// entries reads the flattened file system of img: path → header, and
// regular files' content.
func entries(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string]string) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdrs, content := map[string]*tar.Header{}, map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := "/" + strings.TrimSuffix(h.Name, "/")
		hdrs[p] = h
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			content[p] = string(b)
		}
	}
	return hdrs, content
}

// TestWriteAllLoads writes the three tarballs and loads each back with
// go-containerregistry: tag, entrypoint, user, files.
func TestWriteAllLoads(t *testing.T) {
	libDir := t.TempDir()
	multi := filepath.Join(libDir, "xtables-nft-multi")
	if err := os.WriteFile(multi, []byte("multi"), 0o755); err != nil {
		t.Fatal(err)
	}
	host := []File{
		{Path: "/usr/sbin/xtables-nft-multi", Src: multi},
		{Path: "/usr/sbin/iptables-restore", Link: "xtables-nft-multi"},
	}
	specs, err := Specs(Options{BinDir: fakeBins(t), Host: host}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	paths, err := WriteAll(context.Background(), specs, WriteOptions{Hub: "example.com/strait", Tag: "1.2.3", OutDir: out})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		entrypoint string
		user       string
		files      map[string]string // path → content
	}{
		"straitd":     {BinDir + "/straitd", "65534:65534", map[string]string{BinDir + "/straitd": "straitd"}},
		"strait-echo": {BinDir + "/strait-echo", "65534:65534", map[string]string{BinDir + "/strait-echo": "strait-echo"}},
		"proxy": {BinDir + "/strait-agent", "1337:1337", map[string]string{
			BinDir + "/strait-agent": "strait-agent", BinDir + "/strait-proxy": "strait-proxy",
			"/usr/sbin/xtables-nft-multi": "multi",
		}},
	}
	if len(paths) != len(want) {
		t.Fatalf("wrote %v, want %d images", paths, len(want))
	}
	for _, p := range paths {
		n := strings.TrimSuffix(filepath.Base(p), ".tar")
		w, ok := want[n]
		if !ok {
			t.Fatalf("unexpected image %s", p)
		}
		tag, err := name.NewTag("example.com/strait/" + n + ":1.2.3")
		if err != nil {
			t.Fatal(err)
		}
		img, err := tarball.ImageFromPath(p, &tag)
		if err != nil {
			t.Fatalf("%s: load with tag %s: %v", p, tag, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(cf.Config.Entrypoint, " "); got != w.entrypoint {
			t.Errorf("%s: entrypoint %q, want %q", n, got, w.entrypoint)
		}
		if cf.Config.User != w.user {
			t.Errorf("%s: user %q, want %q", n, cf.Config.User, w.user)
		}
		if cf.OS != "linux" || cf.Architecture == "" {
			t.Errorf("%s: platform %s/%s, want linux/GOARCH", n, cf.OS, cf.Architecture)
		}
		hdrs, content := entries(t, img)
		for path, c := range w.files {
			if content[path] != c {
				t.Errorf("%s: %s holds %q, want %q", n, path, content[path], c)
			}
			if h := hdrs[path]; h == nil || h.Mode&0o111 == 0 {
				t.Errorf("%s: %s is not executable: %+v", n, path, h)
			}
		}
		if h := hdrs["/tmp"]; h == nil || h.Typeflag != tar.TypeDir || h.Mode&0o1777 != 0o1777 {
			t.Errorf("%s: /tmp is not a sticky world-writable directory: %+v", n, h)
		}
		if !strings.Contains(content["/etc/passwd"], "istio-proxy:x:1337:1337") {
			t.Errorf("%s: /etc/passwd has no istio-proxy 1337: %q", n, content["/etc/passwd"])
		}
		if n == "proxy" {
			if h := hdrs["/usr/sbin/iptables-restore"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "xtables-nft-multi" {
				t.Errorf("proxy: /usr/sbin/iptables-restore is not a link to xtables-nft-multi: %+v", h)
			}
			if h := hdrs["/etc/istio/proxy"]; h == nil || h.Uid != ProxyUID {
				t.Errorf("proxy: /etc/istio/proxy not owned by %d: %+v", ProxyUID, h)
			}
			if !strings.Contains(strings.Join(cf.Config.Env, " "), "XTABLES_LIBDIR="+XtablesDir) {
				t.Errorf("proxy: env %v has no XTABLES_LIBDIR", cf.Config.Env)
			}
		}
	}
}

func TestSpecsErrors(t *testing.T) {
	if _, err := Specs(Options{BinDir: t.TempDir(), Host: []File{{Path: "/x", Link: "y"}}}, t.TempDir()); err == nil || !strings.Contains(err.Error(), "binary straitd") {
		t.Errorf("missing binaries: err %v, want it to name straitd", err)
	}
	if _, err := Specs(Options{BinDir: fakeBins(t)}, t.TempDir()); err == nil || !strings.Contains(err.Error(), "proxy image") {
		t.Errorf("no host files: err %v, want it to name the proxy image", err)
	}
	if _, err := Build(Spec{Name: "x", Files: []File{{Path: "relative/path"}}}); err == nil || !strings.Contains(err.Error(), "relative/path") {
		t.Errorf("relative path: err %v, want it named", err)
	}
	// The same file twice is one entry; two contents for one path are an
	// error naming it.
	if _, err := Build(Spec{Name: "x", Files: []File{{Path: "/a", Link: "b"}, {Path: "/a", Link: "b"}}}); err != nil {
		t.Errorf("identical entries: %v", err)
	}
	if _, err := Build(Spec{Name: "x", Files: []File{{Path: "/a", Link: "b"}, {Path: "/a", Link: "c"}}}); err == nil || !strings.Contains(err.Error(), `"/a"`) {
		t.Errorf("conflicting entries: err %v, want it to name /a", err)
	}
}

func TestParseLdd(t *testing.T) {
	out := "\n\tlinux-vdso.so.1 (0x00007f)\n\n\tlibxtables.so.12 => /lib/x86_64-linux-gnu/libxtables.so.12 (0x00007f)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x7f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n\tlibgone.so => not found\n"
	got := strings.Join(parseLdd([]byte(out)), ",")
	want := "/lib/x86_64-linux-gnu/libxtables.so.12,/lib/x86_64-linux-gnu/libc.so.6,/lib64/ld-linux-x86-64.so.2"
	if got != want {
		t.Errorf("parseLdd = %s, want %s", got, want)
	}
}

// TestImageRuns builds the real images from a static straitd and the
// machine's iptables, unpacks the straitd and proxy images, and runs
// straitd --help and the proxy image's iptables-save and ip in a chroot of
// each: the binaries and libraries the images hold are enough to run.
func TestImageRuns(t *testing.T) {
	testreq.Root(t, "chroot into the unpacked image")
	goBin := testreq.Binary(t, "go", "golang-go")
	ctx := context.Background()
	host, err := HostFiles(ctx, HostOptions{Programs: HostPrograms, ExtraDirs: []string{XtablesDir}})
	if err != nil {
		testreq.Missing(t, "%v", err)
	}
	bins := fakeBins(t)
	for _, n := range []string{"straitd", "strait-agent"} {
		if err := os.Remove(filepath.Join(bins, n)); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command(goBin, "build", "-o", bins, "github.com/straitmesh/strait/cmd/straitd", "github.com/straitmesh/strait/cmd/strait-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build straitd and strait-agent: %v\n%s", err, out)
	}
	specs, err := Specs(Options{BinDir: bins, Host: host}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][][]string{
		"straitd": {{BinDir + "/straitd", "--help"}},
		"proxy": {
			{BinDir + "/strait-agent", "--help"},
			{"/usr/sbin/iptables-nft-save", "--version"},
			{"/usr/sbin/ip6tables-legacy-restore", "--version"},
			{"/usr/sbin/ip", "-V"},
		},
	}
	for _, s := range specs {
		cmds, ok := cases[s.Name]
		if !ok {
			continue
		}
		img, err := Build(s)
		if err != nil {
			t.Fatal(err)
		}
		root := unpack(t, img)
		for _, argv := range cmds {
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
			cmd.Dir = "/"
			cmd.Env = []string{"PATH=/usr/local/bin:/usr/sbin", "XTABLES_LIBDIR=" + XtablesDir}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("%s image: %v: %v\n%s", s.Name, argv, err, out)
				continue
			}
			if len(out) == 0 {
				t.Errorf("%s image: %v printed nothing", s.Name, argv)
			}
		}
		if s.Name == "proxy" {
			captureFromImage(t, root)
		}
	}
}

// captureFromImage runs the init container's command, strait-agent
// iptables, from the unpacked proxy image (chroot) in a network namespace
// the test makes, and checks the capture rules are in that namespace.
func captureFromImage(t *testing.T, root string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := netns.Available(); err != nil {
		testreq.Missing(t, "network namespaces: %v", err)
	}
	// A container runtime gives the container a /dev; the chroot gets
	// the one node the agent's commands open.
	if err := os.MkdirAll(filepath.Join(root, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(filepath.Join(root, "dev", "null"), syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	network, err := netns.NewNetwork(ctx, netns.NetworkOptions{Prefix: "img"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := network.Close(); err != nil {
			t.Errorf("close network: %v", err)
		}
	})
	pod, err := network.AddPod(ctx, "init")
	if err != nil {
		t.Fatal(err)
	}
	out, err := pod.Run(ctx, netns.ExecOptions{}, "chroot", root, BinDir+"/strait-agent", "iptables",
		"-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT", "-i", "*", "-x", "", "-b", "*", "-d", "15090,15021,15020")
	if err != nil {
		t.Fatalf("strait-agent iptables from the proxy image: %v\n%s", err, out)
	}
	var rules []byte
	for _, save := range []string{"iptables-nft-save", "iptables-legacy-save"} {
		b, _ := pod.Run(ctx, netns.ExecOptions{}, save)
		rules = append(rules, b...)
	}
	for _, want := range []string{"-A OUTPUT -p tcp -j ISTIO_OUTPUT", "-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001", "-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006"} {
		if !strings.Contains(string(rules), want) {
			t.Errorf("pod rules lack %q after the image's strait-agent iptables:\n%s", want, rules)
		}
	}
}

// unpack writes img's file system into a temporary directory.
func unpack(t *testing.T, img v1.Image) string {
	t.Helper()
	root := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return root
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, os.FileMode(h.Mode).Perm())
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		case tar.TypeReg:
			var f *os.File
			if f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode).Perm()); err == nil {
				_, err = io.Copy(f, tr)
				f.Close()
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
