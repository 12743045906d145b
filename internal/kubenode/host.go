package kubenode

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// lockPath serializes nodes across processes: kube-proxy's nftables
// tables, the kubelet's device-plugin socket and the host paths below are
// one per machine, so two nodes at once (two test packages run in
// parallel) would fight over them.
var lockPath = filepath.Join(os.TempDir(), "strait-kubenode.lock")

// lockMachine takes the machine-wide node lock, waiting for another node's
// Stop; the returned file holds it until closed.
func lockMachine(ctx context.Context, progress io.Writer) (*os.File, error) {
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	waiting := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", lockPath, err)
		}
		if !waiting {
			fmt.Fprintf(progress, "kubenode: another node runs on this machine (%s is locked); waiting for it to stop\n", lockPath)
			waiting = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for the node lock %s: %w", lockPath, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// hostPaths are the paths outside the node's directory that the kubelet,
// containerd and its CNI library hard-code (the kubelet's device-plugin
// socket, containerd's shim sockets, libcni's result cache, the
// kubelet's /var/log/containers links). Stop removes those the node
// created.
var hostPaths = []string{"/var/lib/kubelet", "/var/lib/cni", "/run/containerd", "/var/log/containers", "/var/log/pods"}

// missingHostPaths returns the host paths that do not exist yet.
func missingHostPaths() []string {
	var missing []string
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			missing = append(missing, p)
		}
	}
	return missing
}

// removeHostPaths removes the kubelet's links to the node's logs from
// /var/log/containers, then the host paths the node created.
func removeHostPaths(dir string, created []string) error {
	links, _ := filepath.Glob("/var/log/containers/*.log")
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, dir+"/") {
			_ = os.Remove(l)
		}
	}
	var errs []string
	for _, p := range created {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove host paths: %s", strings.Join(errs, "; "))
	}
	return nil
}
