package iptables

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/straitmesh/strait/internal/origdst"
	"github.com/straitmesh/strait/internal/transparent"
)

// CheckOptions configures CheckCapture.
type CheckOptions struct {
	// ProbePort is the destination port of the test connections when the
	// rules capture every port (default 15002, istio's
	// --iptables-probe-port).
	ProbePort uint16
	// Timeout bounds each test connection (default 5s).
	Timeout time.Duration
	// Enter runs fn on a locked OS thread in the target network namespace;
	// nil means this process's namespace. Sockets fn creates stay there
	// (testenv's Pod.Do with a nil identity fits).
	Enter func(fn func() error) error
}

// CaptureError says which capture path a check found broken.
type CaptureError struct {
	Path   string // "outbound" or "inbound"
	Detail string
}

func (e *CaptureError) Error() string {
	return fmt.Sprintf("iptables validation failed: %s capture does not work: %s", e.Path, e.Detail)
}

// CheckCapture proves that the rules applied for cfg really capture
// traffic (istio-iptables --run-validation), with probe listeners on the
// capture ports (so it must run before the proxy listens on them):
//
//   - outbound: a connection from a non-proxy user to an address the rules
//     capture (in -i, not in -x, routed out of the pod) reaches the proxy
//     port with SO_ORIGINAL_DST equal to that address;
//   - inbound: a connection from the proxy's UID/GID to the pod's own
//     address on a captured port reaches the inbound capture port with
//     SO_ORIGINAL_DST preserved (the ISTIO_OUTPUT -> ISTIO_IN_REDIRECT
//     path; traffic arriving from other hosts cannot be produced from
//     inside the namespace).
//
// A path the configuration disables is not checked. The error is a
// *CaptureError naming the broken path.
func CheckCapture(ctx context.Context, cfg Config, opts CheckOptions) error {
	p, err := cfg.parse()
	if err != nil {
		return err
	}
	if opts.ProbePort == 0 {
		opts.ProbePort = 15002
	}
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Second
	}
	enter := opts.Enter
	if enter == nil {
		enter = onLockedThread
	}
	var local []netip.Prefix
	if err := enter(func() error {
		local, err = localPrefixes()
		return err
	}); err != nil {
		return fmt.Errorf("iptables validation: list addresses: %w", err)
	}

	if p.outboundAll || len(p.v4.include) > 0 || len(p.outPortsInclude) > 0 {
		port := probePort(opts.ProbePort, p.outPortsInclude, p.outPortsExclude, nil)
		dst, ok := outboundProbeAddr(p, local)
		if !ok {
			return &CaptureError{Path: "outbound", Detail: "no captured IPv4 destination is routed out of this namespace to test with"}
		}
		if err := probe(ctx, enter, probeSpec{
			path: "outbound", listenPort: p.proxyPort, portFlag: flagProxyPort,
			dst: netip.AddrPortFrom(dst, port), id: nil, timeout: opts.Timeout,
		}); err != nil {
			return err
		}
	}
	if p.inboundEnabled() {
		var podIP netip.Addr
		for _, pfx := range local {
			if pfx.Addr().Is4() && !pfx.Addr().IsLoopback() {
				podIP = pfx.Addr()
				break
			}
		}
		if !podIP.IsValid() {
			return &CaptureError{Path: "inbound", Detail: "the namespace has no IPv4 address besides loopback"}
		}
		port := probePort(opts.ProbePort, p.inboundPorts, append(p.inboundExcludes, p.tunnelPort), p.outPortsExclude)
		uid, _ := strconv.Atoi(p.uids[0])
		gid, _ := strconv.Atoi(p.gids[0])
		if err := probe(ctx, enter, probeSpec{
			path: "inbound", listenPort: p.capturePort, portFlag: flagCapturePort,
			dst: netip.AddrPortFrom(podIP, port), id: &[2]int{uid, gid}, timeout: opts.Timeout,
			transparent: p.mode == ModeTProxy,
		}); err != nil {
			return err
		}
	}
	return nil
}

// probePort is the first of include, or def if include is empty, that is
// not excluded; def is moved up past excluded ports.
func probePort(def uint16, include []string, excludes ...[]string) uint16 {
	excluded := map[string]bool{}
	for _, list := range excludes {
		for _, p := range list {
			excluded[p] = true
		}
	}
	for _, s := range include {
		if !excluded[s] {
			n, _ := strconv.Atoi(s)
			return uint16(n)
		}
	}
	for port := def; port != 0; port++ {
		if !excluded[strconv.Itoa(int(port))] {
			return port
		}
	}
	return def
}

// outboundProbeAddr picks an IPv4 destination the outbound rules capture:
// in the first -i CIDR, or (with '*' or -q only) another address of one of
// the namespace's own subnets, which is routed out of an interface.
func outboundProbeAddr(p *parsed, local []netip.Prefix) (netip.Addr, bool) {
	var candidates []netip.Addr
	if len(p.v4.include) > 0 {
		for _, pfx := range p.v4.include {
			a := pfx.Addr()
			if pfx.Bits() < 31 {
				a = a.Next()
			}
			candidates = append(candidates, a)
		}
	} else {
		for _, pfx := range local {
			if !pfx.Addr().Is4() || pfx.Addr().IsLoopback() || pfx.Bits() >= 31 {
				continue
			}
			// The subnet's last host address, or the one before if that
			// is ours.
			last := lastAddr(pfx.Masked()).Prev()
			if last == pfx.Addr() {
				last = last.Prev()
			}
			candidates = append(candidates, last)
		}
	}
next:
	for _, a := range candidates {
		if a.IsLoopback() {
			continue
		}
		for _, x := range p.v4.exclude {
			if x.Contains(a) {
				continue next
			}
		}
		for _, l := range local {
			if l.Addr() == a {
				continue next
			}
		}
		return a, true
	}
	return netip.Addr{}, false
}

func lastAddr(pfx netip.Prefix) netip.Addr {
	a := pfx.Addr().As4()
	host := uint32(1)<<(32-pfx.Bits()) - 1
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

type probeSpec struct {
	path        string
	listenPort  string
	portFlag    string
	dst         netip.AddrPort
	id          *[2]int // fsuid, fsgid of the dialing socket; nil = this process's
	timeout     time.Duration
	transparent bool
}

// probe listens on the capture port, dials spec.dst and checks that the
// listener got the connection with the original destination.
func probe(ctx context.Context, enter func(func() error) error, spec probeSpec) error {
	fail := func(format string, args ...any) error {
		return &CaptureError{Path: spec.path, Detail: fmt.Sprintf(format, args...)}
	}
	var l net.Listener
	if err := enter(func() error {
		var err error
		if spec.transparent {
			l, err = transparent.ListenTransparent(ctx, "tcp4", ":"+spec.listenPort)
		} else {
			l, err = (&net.ListenConfig{}).Listen(ctx, "tcp4", ":"+spec.listenPort)
		}
		return err
	}); err != nil {
		return fail("cannot listen on %s port %s for the probe (is the proxy already running?): %v", spec.portFlag, spec.listenPort, err)
	}
	defer l.Close()
	type accepted struct {
		orig netip.AddrPort
		err  error
	}
	got := make(chan accepted, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- accepted{err: err}
			return
		}
		defer c.Close()
		orig, err := origdst.Get(c)
		if err != nil || orig == (netip.AddrPort{}) {
			// TPROXY keeps the destination as the local address.
			if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
				orig, err = a.AddrPort(), nil
				orig = netip.AddrPortFrom(orig.Addr().Unmap(), orig.Port())
			}
		}
		got <- accepted{orig: orig, err: err}
	}()

	dctx, cancel := context.WithTimeout(ctx, spec.timeout)
	defer cancel()
	var conn net.Conn
	err := enter(func() error {
		dial := func() error {
			var err error
			conn, err = (&net.Dialer{}).DialContext(dctx, "tcp4", spec.dst.String())
			return err
		}
		if spec.id == nil {
			return dial()
		}
		return asOwner(spec.id[0], spec.id[1], dial)
	})
	if err != nil {
		return fail("a connection to %s did not reach %s port %s: %v", spec.dst, spec.portFlag, spec.listenPort, err)
	}
	defer conn.Close()
	select {
	case a := <-got:
		if a.err != nil {
			return fail("probe listener on port %s: %v", spec.listenPort, a.err)
		}
		if a.orig != spec.dst {
			return fail("a connection to %s reached port %s with original destination %s", spec.dst, spec.listenPort, a.orig)
		}
		return nil
	case <-dctx.Done():
		return fail("a connection to %s was made, but not through %s port %s (something else answered)", spec.dst, spec.portFlag, spec.listenPort)
	}
}

// asOwner runs fn with the calling (locked) thread's fsuid/fsgid set, which
// is what iptables' owner match reads from sockets fn creates.
func asOwner(uid, gid int, fn func() error) error {
	oldGID, err := unix.SetfsgidRetGid(gid)
	if err != nil {
		return err
	}
	oldUID, err := unix.SetfsuidRetUid(uid)
	if err != nil {
		_, _ = unix.SetfsgidRetGid(oldGID)
		return err
	}
	defer func() {
		_, _ = unix.SetfsuidRetUid(oldUID)
		_, _ = unix.SetfsgidRetGid(oldGID)
	}()
	return fn()
}

// onLockedThread runs fn on a goroutine locked to its OS thread; the
// thread is dropped afterwards, since fn may have changed per-thread state.
func onLockedThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- fn()
	}()
	return <-errc
}

// localPrefixes lists the addresses of the (current thread's) namespace.
func localPrefixes() ([]netip.Prefix, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			ones, _ := ipn.Mask.Size()
			ip = ip.Unmap()
			if ip.Is4() && ones > 32 {
				ones -= 96
			}
			out = append(out, netip.PrefixFrom(ip, ones))
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no addresses")
	}
	return out, nil
}
