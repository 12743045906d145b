package localmesh

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// A pod's processes are kept from the other pods' identities, as
// Kubernetes keeps containers apart:
//
//   - Users. Pod .N (the last octet of its address) runs its agent and
//     proxy as ProxyUIDBase+N and its app as AppUIDBase+N (group: the same
//     number), so no two pods of a mesh share a user. The token (0600), the
//     secrets directory (0700) and the SDS socket (0600) belong to the
//     pod's proxy user; the CA's key belongs to root. The capture rules of
//     a pod (its own network namespace) let its own proxy user through.
//   - Files. Every long-running process of a pod (its app, its agent and
//     the proxy the agent starts) runs in a mount namespace of its own in
//     which a tmpfs covers the mesh's work directory, with only the pod's
//     directory and the proxy binaries bound back at their paths (see
//     podView): the other pods' directories (their tokens and SDS
//     sockets), straitd's CA directory and the logs are not there at all.
//     The work directory itself is 0700, so processes outside the views
//     (and other meshes' pods) cannot walk into it either.
//
// The mount namespaces are not persisted (no bind mount of their nsfs
// file): each lives exactly as long as its processes, so stopping the
// processes removes every mount; nothing is left to unmount.
const (
	// ProxyUIDBase plus the last octet of a pod's address is the user and
	// group of the pod's agent and proxy.
	ProxyUIDBase = 1337000
	// AppUIDBase plus the last octet of a pod's address is the user and
	// group of the pod's app (unless Workload.AppAsRoot).
	AppUIDBase = 1338000
)

// podUIDs are the users of the pod at ip: its proxy's and its app's.
func podUIDs(ip netip.Addr) (proxy, app int) {
	n := int(ip.As4()[3])
	return ProxyUIDBase + n, AppUIDBase + n
}

// PodView is what a process of a pod sees of the mesh's files: a tmpfs
// over WorkDir holding only PodDir and ProxyBinDir (bound at their own
// paths), plus Binds.
type PodView struct {
	// WorkDir is covered by a tmpfs.
	WorkDir string
	// PodDir and ProxyBinDir, inside WorkDir, are bound back.
	PodDir, ProxyBinDir string
	// Binds are further bind mounts, made after the tmpfs: a target inside
	// WorkDir is created in the tmpfs (a file for a file source), one
	// outside it must exist (e.g. /etc/resolv.conf).
	Binds []Bind
}

// Bind is one bind mount of a PodView.
type Bind struct {
	Source, Target string
}

// stageDir is the empty directory of the work dir on which a view's tmpfs
// is assembled before it is moved over the work dir.
const stageDir = ".pod-view"

// Wrap makes cmd (an nsenter command line, started as root) run in a new
// private mount namespace with the view. The tmpfs is assembled on
// WorkDir/.pod-view while everything is still visible, then moved over
// WorkDir. The wrapper execs, so the process keeps cmd's pid and process
// group; the namespace and its mounts go away with the last process in it.
func (v PodView) Wrap(cmd *exec.Cmd) *exec.Cmd {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		cmd.Err = fmt.Errorf("a pod's private mount namespace needs unshare (util-linux): %w", err)
		return cmd
	}
	cmd.Args = append([]string{"unshare", "--mount", "--propagation", "private", "--",
		"sh", "-c", v.script(), "strait-pod-view"}, cmd.Args...)
	cmd.Path = unshare
	return cmd
}

// script is the shell program that builds the view and execs "$@".
func (v PodView) script() string {
	stage := filepath.Join(v.WorkDir, stageDir)
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("set -e")
	line("mount -t tmpfs -o mode=0755,size=1m,nosuid,nodev strait-pod-view %s", shQuote(stage))
	var after []Bind
	binds := append([]Bind{{v.PodDir, v.PodDir}, {v.ProxyBinDir, v.ProxyBinDir}}, v.Binds...)
	for _, bd := range binds {
		rel, err := filepath.Rel(v.WorkDir, bd.Target)
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			after = append(after, bd)
			continue
		}
		dst := shQuote(filepath.Join(stage, rel))
		if fi, err := os.Stat(bd.Source); err == nil && !fi.IsDir() {
			line("mkdir -p %s && : > %s", shQuote(filepath.Dir(filepath.Join(stage, rel))), dst)
		} else {
			line("mkdir -p %s", dst)
		}
		line("mount --bind %s %s", shQuote(bd.Source), dst)
	}
	line("mount --move %s %s", shQuote(stage), shQuote(v.WorkDir))
	for _, bd := range after {
		line("mount --bind %s %s", shQuote(bd.Source), shQuote(bd.Target))
	}
	line(`exec "$@"`)
	return b.String()
}

// shQuote quotes s for sh.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// AppBinary is where a pod's app finds its binary bin: bin itself when
// any user may run it (every directory above it searchable by others, the
// file executable by others), else a bind of it at WORKDIR/app/NAME in
// the pod's view (bin lives below a private directory, such as a test
// binary in go test's 0700 build directory), which the returned Bind
// adds.
func AppBinary(workDir, bin string) (path string, bind *Bind) {
	if othersMayRun(bin) {
		return bin, nil
	}
	target := filepath.Join(workDir, "app", filepath.Base(bin))
	return target, &Bind{Source: bin, Target: target}
}

// othersMayRun reports whether a user who owns nothing on the way may
// execute path.
func othersMayRun(path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	fi, err := os.Stat(abs)
	if err != nil || fi.Mode().Perm()&0o001 == 0 {
		return false
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		di, err := os.Stat(dir)
		if err != nil || di.Mode().Perm()&0o001 == 0 {
			return false
		}
		if dir == "/" {
			return true
		}
	}
}

// preparePod gives the pod's directory to its users before its processes
// start: the directory is its proxy's, and its app's group may write there
// too (an app's pid and log files); the secrets (with secure, when the
// pod has them) are the proxy's alone. Its network namespace lets the
// app, not root, bind low ports (unprivilegedPorts).
func preparePod(ctx context.Context, p *Pod, secure bool) error {
	if err := chownTree(p.dir, p.proxyUID, p.proxyUID); err != nil {
		return err
	}
	if err := os.Chown(p.dir, p.proxyUID, p.appGID()); err != nil {
		return err
	}
	if err := os.Chmod(p.dir, 0o775); err != nil {
		return err
	}
	if secure {
		if err := os.Chmod(filepath.Join(p.dir, "var/run/secrets"), secretsMode); err != nil {
			return err
		}
	}
	return unprivilegedPorts(ctx, p)
}

// unprivilegedPorts lets every user of the pod's network namespace bind
// ports below 1024 (net.ipv4.ip_unprivileged_port_start is per network
// namespace), so that an app that is not root still serves :80.
func unprivilegedPorts(ctx context.Context, p *Pod) error {
	cmd := p.Command(ctx, "sysctl", "-q", "-w", "net.ipv4.ip_unprivileged_port_start=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("sysctl net.ipv4.ip_unprivileged_port_start=0 in pod %s: %w: %s", p.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// secretsMode is the mode of a pod's var/run/secrets: its proxy's alone
// (the app of a Kubernetes pod does not mount the sidecar's token or
// workload socket either).
const secretsMode = 0o700
