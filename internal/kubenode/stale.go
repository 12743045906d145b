package kubenode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// bridgeFile, in a node's directory, names the node's bridge, so that a
// later node can remove it when this one's process was killed before its
// Stop ran.
const bridgeFile = "bridge"

// staleNodeDirs returns the node directories under tmp that got past the
// machine lock (they hold containerd's directory or the bridge record) and
// are not own. Called with the lock held, every such directory belongs to
// a node whose process died without Stop: a live node holds the lock. A
// directory with neither is a node still waiting for the lock (made by a
// build that creates its directory first) and is left alone.
func staleNodeDirs(tmp, own string) []string {
	dirs, _ := filepath.Glob(filepath.Join(tmp, "strait-node-*"))
	var out []string
	for _, d := range dirs {
		if d == own {
			continue
		}
		for _, marker := range []string{bridgeFile, "containerd"} {
			if _, err := os.Stat(filepath.Join(d, marker)); err == nil {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

// runcState is what the sweep reads from runc's state.json of a container.
type runcState struct {
	Config struct {
		Namespaces []struct {
			Type string `json:"type"`
			Path string `json:"path"`
		} `json:"namespaces"`
	} `json:"config"`
}

// staleContainers lists the containers runc kept state for under a node's
// directory (containerd's runc root, CRI namespace) and the pod network
// namespace files their state names.
func staleContainers(dir string) (ids, netnsFiles []string) {
	root := filepath.Join(dir, "containerd", "runc", criNamespace)
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, nil
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		ids = append(ids, e.Name())
		b, err := os.ReadFile(filepath.Join(root, e.Name(), "state.json"))
		if err != nil {
			continue
		}
		var st runcState
		if json.Unmarshal(b, &st) != nil {
			continue
		}
		for _, ns := range st.Config.Namespaces {
			if ns.Type == "NEWNET" && strings.HasPrefix(ns.Path, "/var/run/netns/cni-") {
				netnsFiles = append(netnsFiles, ns.Path)
			}
		}
	}
	return ids, netnsFiles
}

// sweepStale removes what nodes whose test process was killed left on the
// machine: their containerd shims, their containers' processes and
// cgroups, pod network namespaces, mounts, bridge, kube-proxy's tables and
// directory. It must run with the machine lock held. Failures are
// reported, not returned: a leftover the sweep cannot remove should not
// stop a new node that may well work beside it.
func sweepStale(tmp, own string, out io.Writer) {
	dirs := staleNodeDirs(tmp, own)
	if len(dirs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, d := range dirs {
		if err := removeStaleNode(ctx, d); err != nil {
			fmt.Fprintf(out, "kubenode: leftovers of %s: %v\n", d, err)
			continue
		}
		fmt.Fprintf(out, "kubenode: removed the leftovers of a node whose process died before it stopped (%s)\n", d)
	}
	if err := removeKubeProxyTables(ctx); err != nil {
		fmt.Fprintf(out, "kubenode: leftover kube-proxy tables: %v\n", err)
	}
}

// removeStaleNode removes one dead node's leftovers.
func removeStaleNode(ctx context.Context, dir string) error {
	var errs []error
	killShims(containerdSocket(filepath.Join(dir, "containerd")))
	ids, netnsFiles := staleContainers(dir)
	if err := removeContainerCgroups(ids); err != nil {
		errs = append(errs, err)
	}
	if err := removeNetns(netnsFiles); err != nil {
		errs = append(errs, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, bridgeFile)); err == nil {
		if name := strings.TrimSpace(string(b)); name != "" {
			if out, err := runIP(ctx, "link", "del", name); err != nil && !strings.Contains(out, "Cannot find device") {
				errs = append(errs, fmt.Errorf("ip link del %s: %w: %s", name, err, out))
			}
		}
	}
	if err := unmountAll(dir); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// runIP runs ip(8) and returns its combined output.
func runIP(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
