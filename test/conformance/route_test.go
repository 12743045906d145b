//go:build conformance

package conformance

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"

	"github.com/straitmesh/strait/internal/kubeapiserver"
)

// routeServiceCIDR routes the ClusterIP range from the host onto the
// node's bridge (the interface that holds nodeIP): kube-proxy's output
// rules DNAT a ClusterIP to a pod of the bridge, and a ClusterIP it has
// no rule for yet stays on the bridge rather than leaving by the host's
// default route. It returns the command that removes the route.
func routeServiceCIDR(ctx context.Context, nodeIP netip.Addr) (func() error, error) {
	dev, err := interfaceWith(nodeIP)
	if err != nil {
		return nil, err
	}
	args := []string{"route", "replace", kubeapiserver.ServiceCIDR.String(), "dev", dev, "src", nodeIP.String()}
	if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return func() error {
		args := []string{"route", "del", kubeapiserver.ServiceCIDR.String(), "dev", dev}
		out, err := exec.Command("ip", args...).CombinedOutput() //nolint:gosec // fixed arguments
		if err != nil && !strings.Contains(string(out), "No such process") && !strings.Contains(string(out), "Cannot find device") {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}, nil
}

// interfaceWith names the interface that holds ip.
func interfaceWith(ip netip.Addr) (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if got, ok := netip.AddrFromSlice(n.IP); ok && got.Unmap() == ip {
					return ifc.Name, nil
				}
			}
		}
	}
	return "", fmt.Errorf("no interface holds the node's address %s", ip)
}
