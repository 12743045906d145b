package kubenode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// killShims SIGKILLs the containerd-shim-runc-v2 processes that serve the
// node's containerd (their command line names its socket). The shims are
// started by that containerd and detach from it, so stopping containerd
// does not end them; they are what is left when the CRI teardown failed.
func killShims(sock string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var killed []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(cmdline, "\x00")), "\x00")
		if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		for i, a := range args {
			if (a == "-address" || a == "--address") && i+1 < len(args) && args[i+1] == sock {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				killed = append(killed, pid)
				break
			}
		}
	}
	return killed
}

// mountsUnder returns the mount points at or below dir, deepest first, from
// /proc/self/mountinfo.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dir = filepath.Clean(dir)
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountAll detaches every mount at or below dir (the kubelet's volume
// tmpfs, containerd's rootfs overlays and shm), deepest first.
func unmountAll(dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []string
	for _, mp := range mounts {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL && err != syscall.ENOENT {
			errs = append(errs, fmt.Sprintf("unmount %s: %v", mp, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// criCgroupParent is the cgroup (under each hierarchy) in which containerd's
// CRI puts the containers of a kubelet that builds no QoS tree
// (cgroupsPerQOS off): /k8s.io/CONTAINER-ID.
const criCgroupParent = "k8s.io"

// containerIDs lists the containers of the CRI's namespace (sandboxes
// included), from ctr; nil if containerd does not answer.
func containerIDs(ctx context.Context, sock string) []string {
	out, err := exec.CommandContext(ctx, "ctr", "--address", sock, "--namespace", criNamespace, "containers", "list", "--quiet").Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

// removeContainerCgroups kills what still runs in the cgroups of the given
// containers (left when the CRI teardown failed) and removes the cgroups,
// in every hierarchy, then the k8s.io parent if nothing else uses it.
func removeContainerCgroups(ids []string) error {
	hierarchies, err := filepath.Glob("/sys/fs/cgroup/*")
	if err != nil {
		return err
	}
	// cgroup v2 alone: the root itself is the one hierarchy.
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		hierarchies = []string{"/sys/fs/cgroup"}
	}
	var errs []string
	for _, h := range hierarchies {
		for _, id := range ids {
			dir := filepath.Join(h, criCgroupParent, id)
			procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			if err != nil {
				continue // not in this hierarchy, or gone
			}
			for _, f := range strings.Fields(string(procs)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			if err := rmdirRetry(dir); err != nil {
				errs = append(errs, err.Error())
			}
		}
		_ = syscall.Rmdir(filepath.Join(h, criCgroupParent)) // busy if another runtime uses it
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove container cgroups: %s", strings.Join(errs, "; "))
	}
	return nil
}

// rmdirRetry removes an empty cgroup, waiting up to a second for killed
// processes to leave it.
func rmdirRetry(dir string) error {
	var err error
	for range 20 {
		if err = syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("rmdir %s: %w", dir, err)
}

// netnsPaths returns the network namespace files (/var/run/netns/cni-…)
// named in the given containers' specs, from ctr.
func netnsPaths(ctx context.Context, sock string, ids []string) []string {
	var paths []string
	for _, id := range ids {
		out, err := exec.CommandContext(ctx, "ctr", "--address", sock, "--namespace", criNamespace, "containers", "info", id).Output()
		if err != nil {
			continue
		}
		var info struct {
			Spec struct {
				Linux struct {
					Namespaces []struct{ Type, Path string }
				}
			}
		}
		if json.Unmarshal(out, &info) != nil {
			continue
		}
		for _, ns := range info.Spec.Linux.Namespaces {
			if ns.Type == "network" && strings.HasPrefix(ns.Path, "/var/run/netns/cni-") {
				paths = append(paths, ns.Path)
			}
		}
	}
	return paths
}

// removeNetns unmounts and deletes network namespace files that the CNI
// teardown left (none when it succeeded).
func removeNetns(paths []string) error {
	var errs []string
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Sprintf("unmount %s: %v", p, err))
		}
		if err := os.Remove(p); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove pod network namespaces: %s", strings.Join(errs, "; "))
	}
	return nil
}
