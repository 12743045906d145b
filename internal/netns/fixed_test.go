package netns

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/testreq"
)

// A network on a subnet the caller names puts pods at the addresses the
// caller names, skips those when it picks addresses itself, refuses
// addresses it cannot give, and refuses a subnet a route already covers.
func TestFixedSubnetAndAddresses(t *testing.T) {
	testreq.Privileged(t, "network namespaces")
	if err := Available(); err != nil {
		testreq.Missing(t, "%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	subnet, err := pickSubnet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n, err := NewNetwork(ctx, NetworkOptions{Prefix: "stfix", Subnet: subnet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	if n.Subnet != subnet || n.HostIP != subnet.Addr().Next() {
		t.Fatalf("network on %s host %s, want %s", n.Subnet, n.HostIP, subnet)
	}
	at := func(last byte) netip.Addr {
		a := subnet.Addr().As4()
		a[3] = last
		return netip.AddrFrom4(a)
	}
	fixed, err := n.AddPodAt(ctx, "fixed", at(2))
	if err != nil {
		t.Fatal(err)
	}
	if fixed.IP != at(2) {
		t.Fatalf("fixed pod at %s, want %s", fixed.IP, at(2))
	}
	out, err := fixed.Run(ctx, ExecOptions{}, "ip", "-4", "-o", "addr", "show", "dev", "eth0")
	if err != nil || !strings.Contains(string(out), at(2).String()+"/24") {
		t.Fatalf("eth0 of the fixed pod: %s %v", out, err)
	}
	auto, err := n.AddPod(ctx, "auto")
	if err != nil {
		t.Fatal(err)
	}
	if auto.IP != at(3) {
		t.Fatalf("picked pod at %s, want %s (the first address no pod has)", auto.IP, at(3))
	}
	for _, c := range []struct {
		ip   netip.Addr
		want string
	}{
		{at(2), "another pod's"},
		{at(1), "host's address"},
		{at(255), "broadcast"},
		{netip.MustParseAddr("192.0.2.9"), "outside"},
	} {
		if _, err := n.AddPodAt(ctx, "bad"+c.ip.String()[len(c.ip.String())-1:], c.ip); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AddPodAt %s: %v, want an error with %q", c.ip, err, c.want)
		}
	}
	_, err = NewNetwork(ctx, NetworkOptions{Prefix: "stfix", Subnet: subnet})
	var taken *SubnetTakenError
	if !errors.As(err, &taken) || taken.Subnet != subnet {
		t.Fatalf("second network on %s: %v, want a SubnetTakenError", subnet, err)
	}
	if _, err := NewNetwork(ctx, NetworkOptions{Subnet: netip.MustParsePrefix("10.1.0.0/16")}); err == nil || !strings.Contains(err.Error(), "/24") {
		t.Fatalf("a /16: %v, want a refusal", err)
	}
}
