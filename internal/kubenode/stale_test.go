package kubenode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/testreq"
)

func mkdirs(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStaleNodeDirs(t *testing.T) {
	tmp := t.TempDir()
	own := filepath.Join(tmp, "strait-node-own")
	deadCD := filepath.Join(tmp, "strait-node-1")     // got as far as containerd
	deadBridge := filepath.Join(tmp, "strait-node-2") // got as far as its bridge
	waiting := filepath.Join(tmp, "strait-node-3")    // still waiting for the lock
	other := filepath.Join(tmp, "strait-kube-4")      // another package's directory
	mkdirs(t, filepath.Join(own, "containerd"), filepath.Join(deadCD, "containerd"), deadBridge, waiting, filepath.Join(other, "containerd"))
	if err := os.WriteFile(filepath.Join(deadBridge, bridgeFile), []byte("stbabcdef\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := staleNodeDirs(tmp, own)
	slices.Sort(got)
	want := []string{deadCD, deadBridge}
	if !slices.Equal(got, want) {
		t.Fatalf("staleNodeDirs = %v, want %v", got, want)
	}
}

func TestStaleContainers(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "containerd", "runc", criNamespace)
	mkdirs(t, filepath.Join(root, "sandbox1"), filepath.Join(root, "app1"), filepath.Join(root, "broken"))
	write := func(id, body string) {
		if err := os.WriteFile(filepath.Join(root, id, "state.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("sandbox1", `{"config":{"namespaces":[{"type":"NEWPID"},{"type":"NEWNET","path":"/var/run/netns/cni-1234"}]}}`)
	// A container that joins its sandbox's network namespace by the
	// sandbox process's path: not a pod namespace file to remove.
	write("app1", `{"config":{"namespaces":[{"type":"NEWNET","path":"/proc/42/ns/net"}]}}`)
	write("broken", `{`)
	ids, netnsFiles := staleContainers(dir)
	slices.Sort(ids)
	if want := []string{"app1", "broken", "sandbox1"}; !slices.Equal(ids, want) {
		t.Fatalf("ids = %v, want %v", ids, want)
	}
	if want := []string{"/var/run/netns/cni-1234"}; !slices.Equal(netnsFiles, want) {
		t.Fatalf("netns files = %v, want %v", netnsFiles, want)
	}
	if ids, files := staleContainers(t.TempDir()); ids != nil || files != nil {
		t.Fatalf("a node with no runc state: %v %v", ids, files)
	}
}

// TestRemoveStaleNode leaves what a killed node leaves (its bridge, a pod
// network namespace named in runc's state, a mount under its directory)
// and checks that the sweep removes each and the directory.
func TestRemoveStaleNode(t *testing.T) {
	testreq.Privileged(t, "bridges, network namespaces and mounts")
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(b)
	bridge, nsName := "stbsw"+id, "cni-sweeptest-"+id
	nsPath := "/var/run/netns/" + nsName
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	run("ip", "link", "add", bridge, "type", "bridge")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", bridge).Run() })
	run("ip", "netns", "add", nsName)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", nsName).Run() })

	dir := filepath.Join(t.TempDir(), "strait-node-dead")
	sandbox := filepath.Join(dir, "containerd", "runc", criNamespace, "sandbox"+id)
	mnt := filepath.Join(dir, "kubelet", "pods", "vol")
	mkdirs(t, sandbox, mnt)
	if err := os.WriteFile(filepath.Join(dir, bridgeFile), []byte(bridge+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := `{"config":{"namespaces":[{"type":"NEWNET","path":"` + nsPath + `"}]}}`
	if err := os.WriteFile(filepath.Join(sandbox, "state.json"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(mnt, syscall.MNT_DETACH) })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := removeStaleNode(ctx, dir); err != nil {
		t.Fatalf("removeStaleNode: %v", err)
	}
	if err := exec.Command("ip", "link", "show", bridge).Run(); err == nil {
		t.Errorf("bridge %s is still there", bridge)
	}
	if _, err := os.Stat(nsPath); err == nil {
		t.Errorf("network namespace %s is still there", nsPath)
	}
	if mounts, _ := mountsUnder(dir); len(mounts) > 0 {
		t.Errorf("mounts left under the node's directory: %v", mounts)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("the node's directory %s is still there", dir)
	}
	// A second sweep of what is gone is not an error.
	if err := removeStaleNode(ctx, dir); err != nil {
		t.Errorf("second removeStaleNode: %v", err)
	}
}
