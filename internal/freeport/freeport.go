// Package freeport picks TCP ports for tests and test environments that
// must name a port before the process or listener that binds it exists
// (etcd's and kube-apiserver's flags, a listener in an xDS push).
//
// A port the kernel handed out with ":0" and that was then released is
// back in the ephemeral range: until the real owner binds it, any outgoing
// connection on the machine may take it as its source port, and any other
// ":0" listener may get it, and the owner's bind then fails. Under a test
// suite's load (thousands of loopback connections a second) that window
// is seconds long. So Ports picks below the ephemeral range
// (net.ipv4.ip_local_port_range), which the kernel never assigns on its
// own, starting at a random port so that concurrent callers (other test
// binaries) rarely try the same one, and checks each port by binding it.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

const (
	// rangeStart is the lowest port handed out: above Istio's 15000s and
	// the other well-known service ports tests start on fixed numbers.
	rangeStart = 16384
	// rangeEnd bounds the range from above when the ephemeral range starts
	// higher: 30000-32767 is Kubernetes' NodePort range, which kube-proxy's
	// rules may claim on this host.
	rangeEnd = 30000
)

// Ports returns n distinct TCP ports that were free on host a moment ago
// and that the kernel does not hand out by itself. Where the ephemeral
// range leaves no room below it, it falls back to ports the kernel picks.
func Ports(host string, n int) ([]int, error) {
	lo, hi := rangeStart, rangeEnd
	if eph := ephemeralStart(); eph < hi {
		hi = eph
	}
	if hi-lo < 1000 {
		return kernelPorts(host, n)
	}
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	start := lo + rand.IntN(hi-lo)
	for i := 0; i < hi-lo && len(ports) < n; i++ {
		p := lo + (start-lo+i)%(hi-lo)
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		held = append(held, l)
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("freeport: only %d of %d ports free on %s in %d-%d", len(ports), n, host, lo, hi-1)
	}
	return ports, nil
}

// Port is Ports(host, 1)[0].
func Port(host string) (int, error) {
	ps, err := Ports(host, 1)
	if err != nil {
		return 0, err
	}
	return ps[0], nil
}

// Addr returns "127.0.0.1:PORT" for a port from Ports.
func Addr() (string, error) {
	p, err := Port("127.0.0.1")
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// ephemeralStart is the first port of the kernel's ephemeral range
// (Linux's default, 32768, when it cannot be read).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	p, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return p
}

// kernelPorts asks the kernel for n ports (":0"), holding each until all
// are known so that they are distinct.
func kernelPorts(host string, n int) ([]int, error) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("freeport: listen on %s: %w", host, err)
		}
		held = append(held, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
