// Package netns runs "pods" as Linux network namespaces on a private
// bridge, for tests and the demo. One Network is one bridge on a random
// unused 10.X.Y.0/24 with the host at 10.X.Y.1 (no uplink, no NAT, no
// forwarding rules); each Pod is a netns with a veth "eth0" on that bridge,
// lo up, and routes only for the /24 and the service VIP range
// 240.240.0.0/16 (no default route).
//
// Everything it creates is named after a random run id, and Close removes
// it all. It needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) plus the `ip` and
// `nsenter` commands; Available says whether they are there.
package netns

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ServiceCIDR is the service VIP range every pod routes to its eth0.
var ServiceCIDR = netip.MustParsePrefix("240.240.0.0/16")

// Available reports why namespaces cannot be created here, or nil.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("testenv needs root (network namespaces, veth, bridge); run the tests as root")
	}
	for _, bin := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("testenv needs %q in PATH (iproute2, util-linux): %w", bin, err)
		}
	}
	return nil
}

// NetworkOptions configures NewNetwork.
type NetworkOptions struct {
	// Prefix starts every netns name: PREFIX-RUNID-POD. Default "st".
	Prefix string
	// Subnet, when set, is the /24 to use instead of a random free one
	// (a user's config that names its workloads' addresses). It must be
	// an IPv4 /24 that no host route overlaps; the host takes its .1.
	Subnet netip.Prefix
}

// Network is one bridge and its pods. Its exported fields are set by
// NewNetwork and read-only afterwards; methods are safe for concurrent use.
type Network struct {
	// RunID is the random id in every name this network creates.
	RunID string
	// Bridge is the bridge's interface name ("stb" + RunID).
	Bridge string
	// Subnet is the network's /24.
	Subnet netip.Prefix
	// HostIP is the bridge's address (x.y.z.1), reachable from every pod:
	// host-side servers (straitd) listen here.
	HostIP netip.Addr

	prefix string

	mu       sync.Mutex // guards the fields below
	pods     []*Pod
	nextHost int // last octet of the next pod
	closed   bool
	closeErr error
}

// allocMu serializes subnet choice within this process, so that two
// networks created at once do not pick the same /24. Across processes the
// choice is random and re-checked after the address is added.
var allocMu sync.Mutex

// NewNetwork creates a bridge with the host address on a fresh /24. On
// error nothing is left behind.
func NewNetwork(ctx context.Context, opts NetworkOptions) (*Network, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = "st"
	}
	if !validName(prefix) {
		return nil, fmt.Errorf("testenv: prefix %q: use letters, digits, '-' or '_' (at most 32)", prefix)
	}
	if opts.Subnet.IsValid() && (!opts.Subnet.Addr().Is4() || opts.Subnet.Bits() != 24 || opts.Subnet.Masked() != opts.Subnet) {
		return nil, fmt.Errorf("testenv: subnet %s: want an IPv4 /24 such as 10.99.0.0/24", opts.Subnet)
	}
	allocMu.Lock()
	defer allocMu.Unlock()
	var lastErr error
	for attempt := 0; attempt < 20; attempt++ {
		n, err := tryNetwork(ctx, prefix, opts.Subnet)
		var taken *SubnetTakenError
		if errors.As(err, &taken) && opts.Subnet.IsValid() {
			return nil, err // another id will not help
		}
		if err == nil {
			return n, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("testenv: create network: %w", lastErr)
}

// SubnetTakenError says that a subnet asked for overlaps a route of the
// host (another network, an interface's own subnet).
type SubnetTakenError struct {
	Subnet netip.Prefix
	Route  netip.Prefix
}

func (e *SubnetTakenError) Error() string {
	return fmt.Sprintf("subnet %s overlaps the host's route to %s", e.Subnet, e.Route)
}

func tryNetwork(ctx context.Context, prefix string, fixed netip.Prefix) (*Network, error) {
	id, err := randomHex(3)
	if err != nil {
		return nil, err
	}
	subnet := fixed
	if subnet.IsValid() {
		routes, err := hostRoutes(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range routes {
			if r.Overlaps(subnet) {
				return nil, &SubnetTakenError{Subnet: subnet, Route: r}
			}
		}
	} else if subnet, err = pickSubnet(ctx); err != nil {
		return nil, err
	}
	n := &Network{
		RunID:    id,
		Bridge:   "stb" + id,
		Subnet:   subnet,
		HostIP:   subnet.Addr().Next(),
		prefix:   prefix,
		nextHost: 2,
	}
	if _, err := ipCmd(ctx, "link", "add", n.Bridge, "type", "bridge"); err != nil {
		return nil, err // most likely the name exists: retry with a new id
	}
	fail := func(err error) (*Network, error) { //nolint:contextcheck // cleanup must run even when ctx ran out
		_ = n.Close()
		return nil, err
	}
	hostCIDR := netip.PrefixFrom(n.HostIP, subnet.Bits()).String()
	if _, err := ipCmd(ctx, "addr", "add", hostCIDR, "dev", n.Bridge); err != nil {
		return fail(err)
	}
	if _, err := ipCmd(ctx, "link", "set", n.Bridge, "up"); err != nil {
		return fail(err)
	}
	// Another process may have taken the same /24 meanwhile.
	routes, err := hostRoutes(ctx)
	if err != nil {
		return fail(err)
	}
	same := 0
	for _, r := range routes {
		if r == subnet { // our own, plus any other bridge's
			same++
		}
	}
	if same > 1 {
		return fail(&SubnetTakenError{Subnet: subnet, Route: subnet})
	}
	return n, nil
}

// pickSubnet returns a random 10.X.Y.0/24 that no host route overlaps.
func pickSubnet(ctx context.Context) (netip.Prefix, error) {
	routes, err := hostRoutes(ctx)
	if err != nil {
		return netip.Prefix{}, err
	}
	for i := 0; i < 100; i++ {
		x, err := rand.Int(rand.Reader, big.NewInt(190)) // 10.64.0.0 - 10.253.255.0
		if err != nil {
			return netip.Prefix{}, err
		}
		y, err := rand.Int(rand.Reader, big.NewInt(256))
		if err != nil {
			return netip.Prefix{}, err
		}
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(64 + x.Int64()), byte(y.Int64()), 0}), 24)
		free := true
		for _, r := range routes {
			if r.Overlaps(p) {
				free = false
				break
			}
		}
		if free {
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("no free 10.X.Y.0/24: every candidate overlaps a host route")
}

// hostRoutes lists the destinations of the host's IPv4 routes in all
// tables, default routes excluded.
func hostRoutes(ctx context.Context) ([]netip.Prefix, error) {
	out, err := ipCmd(ctx, "-4", "-o", "route", "show", "table", "all")
	if err != nil {
		return nil, err
	}
	var prefixes []netip.Prefix
	for _, line := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(line) {
			// The first field is the destination, or a route type
			// ("local", "broadcast", ...) followed by it.
			if f == "default" {
				break
			}
			if p, err := netip.ParsePrefix(f); err == nil {
				prefixes = append(prefixes, p.Masked())
				break
			}
			if a, err := netip.ParseAddr(f); err == nil {
				prefixes = append(prefixes, netip.PrefixFrom(a, a.BitLen()))
				break
			}
		}
	}
	return prefixes, nil
}

// Close kills the processes started with Pod.Start and every other process
// left in the pods' namespaces, deletes the namespaces, veths and the
// bridge. It is idempotent and safe to call from a signal handler
// goroutine; later calls return the first call's error.
func (n *Network) Close() error {
	n.mu.Lock()
	if n.closed {
		defer n.mu.Unlock()
		return n.closeErr
	}
	n.closed = true
	pods := n.pods
	n.mu.Unlock()

	// Cleanup must run even when the test's context is done.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, p := range pods {
		errs = append(errs, p.close(ctx))
	}
	if _, err := ipCmd(ctx, "link", "del", n.Bridge); err != nil && !isNotFound(err) {
		errs = append(errs, err)
	}
	err := errors.Join(errs...)
	n.mu.Lock()
	n.closeErr = err
	n.mu.Unlock()
	return err
}

// CloseOnSignal closes the network when the process gets SIGINT or
// SIGTERM, then lets the signal take its default course (the process
// exits). Call stop when the network is closed normally.
func (n *Network) CloseOnSignal() (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	var once sync.Once
	go func() {
		select {
		case sig := <-ch:
			_ = n.Close()
			signal.Stop(ch)
			if s, ok := sig.(syscall.Signal); ok {
				_ = syscall.Kill(os.Getpid(), s)
			}
		case <-done:
		}
	}()
	return func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
		})
	}
}

// ipCmd runs `ip ARGS...` and returns its stdout; the error carries stderr.
func ipCmd(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "ip", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func isNotFound(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Cannot find device") || strings.Contains(s, "No such file") ||
		strings.Contains(s, "does not exist")
}

func randomHex(nbytes int) (string, error) {
	b := make([]byte, nbytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

func validName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}
