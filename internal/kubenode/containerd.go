package kubenode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/straitmesh/strait/internal/daemon"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criNamespace is the containerd namespace the CRI plugin keeps the
// kubelet's images and containers in.
const criNamespace = "k8s.io"

// cniBinDir is where Debian's containernetworking-plugins installs them.
const cniBinDir = "/usr/lib/cni"

// containerdConfig is containerd 1.6's config (version 2) for the node:
// every directory and socket under dir (runc's state too), the CRI plugin with the local
// pause image, runc through the v2 shim with the cgroupfs driver (the
// kubelet's), CNI from confDir, and the plugins that would touch paths
// outside dir (opt: /opt/containerd) or need other file systems disabled.
func containerdConfig(dir, sandboxImage, cniConfDir string) string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return fmt.Sprintf(`version = 2
root = %s
state = %s
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %s

[ttrpc]
  address = %s

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %s
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  # The kubelet asks for oom_score_adj -998 for the pause container; a
  # process without CAP_SYS_RESOURCE (a VM's or CI's sandboxed root) may
  # not go below its own score, and runc would fail the sandbox.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %s
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %s
    conf_dir = %s
    max_conf_num = 1
`, q(filepath.Join(dir, "root")), q(filepath.Join(dir, "state")),
		q(containerdSocket(dir)), q(containerdSocket(dir)+".ttrpc"),
		q(sandboxImage), q(filepath.Join(dir, "runc")), q(cniBinDir), q(cniConfDir))
}

func containerdSocket(dir string) string { return filepath.Join(dir, "containerd.sock") }

// cniConfig is the pod network: Debian's bridge plugin on the node's
// existing bridge (created by internal/netns with the node's address on
// it), host-local addresses from the upper half of the /24, and in the pod
// only a route for the service range through the node besides the /24
// itself: no default route, no masquerade, and isGateway off so that the
// plugin neither re-addresses the bridge nor turns on the host's IP
// forwarding.
func cniConfig(bridge, subnet, gateway, serviceCIDR, ipamDir string) ([]byte, error) {
	first := strings.TrimSuffix(gateway, ".1") + ".100"
	last := strings.TrimSuffix(gateway, ".1") + ".250"
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "strait-node",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      bridge,
				"isGateway":   false,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": ipamDir,
					"ranges": [][]map[string]string{{{
						"subnet": subnet, "gateway": gateway, "rangeStart": first, "rangeEnd": last,
					}}},
					"routes": []map[string]string{{"dst": serviceCIDR, "gw": gateway}},
				},
			},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// dialCRI connects to containerd's CRI service.
func dialCRI(sock string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// waitCRI waits until containerd answers the CRI Status call with the
// runtime ready (the network turns ready once the CNI config is read).
func waitCRI(ctx context.Context, rt runtimeapi.RuntimeServiceClient, p *daemon.Process) error {
	var last string
	for {
		if err := p.CheckRunning(); err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := rt.Status(cctx, &runtimeapi.StatusRequest{})
		cancel()
		if err == nil {
			ready := true
			for _, c := range st.GetStatus().GetConditions() {
				if !c.GetStatus() {
					ready = false
					last = fmt.Sprintf("%s: %s %s", c.GetType(), c.GetReason(), c.GetMessage())
				}
			}
			if ready {
				return nil
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("containerd's CRI not ready (%s): %w; log %s:\n%s", last, ctx.Err(), p.LogPath, p.LogTail(20))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// importImage loads a docker-save/OCI tarball into the CRI's namespace
// with ctr, unpacked for the overlayfs snapshotter.
func importImage(ctx context.Context, sock, tarball string) error {
	cmd := exec.CommandContext(ctx, "ctr", "--address", sock, "--namespace", criNamespace,
		"images", "import", "--snapshotter", "overlayfs", tarball)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("import image %s into containerd: %w: %s", tarball, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// removeSandboxes stops and removes every pod sandbox through the CRI:
// containerd kills the containers, and the CNI DEL removes the pod's veth,
// its address and its network namespace. Errors are collected, not
// stopped at, so one stuck pod does not keep the others.
func removeSandboxes(ctx context.Context, rt runtimeapi.RuntimeServiceClient) error {
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	var errs []string
	for _, sb := range list.GetItems() {
		id := sb.GetId()
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
			errs = append(errs, fmt.Sprintf("stop sandbox %s (%s/%s): %v", id, sb.GetMetadata().GetNamespace(), sb.GetMetadata().GetName(), err))
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
			errs = append(errs, fmt.Sprintf("remove sandbox %s: %v", id, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// writeFile writes data to path, creating its directory.
func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
