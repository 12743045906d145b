package kubenode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/straitmesh/strait/internal/daemon"
)

// kubeProxyTables are the nftables tables kube-proxy's nftables mode owns
// (one per family); deleting them removes every rule it made.
var kubeProxyTables = [][2]string{{"ip", "kube-proxy"}, {"ip6", "kube-proxy"}}

// startKubeProxy starts kube-proxy in nftables mode: its rules live in
// tables of their own (removed by removeKubeProxyTables), and none of the
// host's iptables chains are touched. Service traffic is masqueraded to
// the node's address (--masquerade-all): a pod reaching another pod of the
// same bridge through a ClusterIP then gets the answer back through the
// node, where conntrack undoes the DNAT, without the host-wide
// bridge-nf-call-iptables switch. The conntrack sysctls are left as they
// are (the 0 values), and NodePorts open only on the node's address.
func (n *Node) startKubeProxy(ports [2]int) error {
	if _, err := exec.LookPath("nft"); err != nil {
		return fmt.Errorf("kube-proxy's nftables mode needs the nft command (Debian package nftables): %w", err)
	}
	// The bridge forwards (only) what arrives on it: a pod's packet to a
	// ClusterIP comes in on the bridge, is DNATed, and goes back out on
	// it. The host-wide ip_forward stays as it is.
	if err := os.WriteFile(filepath.Join("/proc/sys/net/ipv4/conf", n.network.Bridge, "forwarding"), []byte("1"), 0o644); err != nil {
		return fmt.Errorf("enable forwarding on the node bridge %s: %w", n.network.Bridge, err)
	}
	p, err := daemon.Start("kube-proxy", filepath.Join(n.binDir, "kube-proxy"), []string{
		"--kubeconfig=" + n.API.KubeconfigPath,
		"--hostname-override=" + n.Name,
		"--proxy-mode=nftables",
		"--masquerade-all=true",
		"--cluster-cidr=" + n.PodSubnet.String(),
		"--nodeport-addresses=" + n.IP.String() + "/32",
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		fmt.Sprintf("--healthz-bind-address=127.0.0.1:%d", ports[0]),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ports[1]),
		"--v=1",
	}, filepath.Join(n.Dir, "kube-proxy.log"))
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.proxy = p
	n.mu.Unlock()
	return nil
}

// removeKubeProxyTables deletes kube-proxy's nftables tables; a table that
// is not there is not an error.
func removeKubeProxyTables(ctx context.Context) error {
	var errs []string
	for _, tbl := range kubeProxyTables {
		out, err := exec.CommandContext(ctx, "nft", "delete", "table", tbl[0], tbl[1]).CombinedOutput()
		if err != nil && !strings.Contains(string(out), "No such file or directory") {
			errs = append(errs, fmt.Sprintf("nft delete table %s %s: %v: %s", tbl[0], tbl[1], err, strings.TrimSpace(string(out))))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
