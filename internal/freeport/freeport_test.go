package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestPortsBelowEphemeralRange: the ports are distinct, bindable, and
// outside the range the kernel assigns to ":0" listeners and outgoing
// connections.
func TestPortsBelowEphemeralRange(t *testing.T) {
	ports, err := Ports("127.0.0.1", 5)
	if err != nil {
		t.Fatal(err)
	}
	eph := ephemeralStart()
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Errorf("port %d returned twice in %v", p, ports)
		}
		seen[p] = true
		if eph-rangeStart >= 1000 && (p < rangeStart || p >= eph || p >= rangeEnd) {
			t.Errorf("port %d outside %d-%d (ephemeral range starts at %d)", p, rangeStart, min(eph, rangeEnd)-1, eph)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d not bindable after Ports returned: %v", p, err)
			continue
		}
		l.Close()
	}
}

// TestPortsSkipsTakenPorts: a port in use is never returned.
func TestPortsSkipsTakenPorts(t *testing.T) {
	// Hold a block of the range; the ports returned must avoid all of it.
	var held []net.Listener
	taken := map[int]bool{}
	for p := rangeStart; p < rangeStart+200; p++ {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		held = append(held, l)
		taken[p] = true
	}
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range 50 {
		p, err := Port("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if taken[p] {
			t.Fatalf("Port returned %d, which this test holds", p)
		}
	}
}

// TestListenUDPTCP: both sockets on the same port; a port whose TCP twin
// is taken is not returned.
func TestListenUDPTCP(t *testing.T) {
	pc, ln, err := ListenUDPTCP("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	defer ln.Close()
	if u, tc := pc.LocalAddr().(*net.UDPAddr).Port, ln.Addr().(*net.TCPAddr).Port; u != tc || u == 0 {
		t.Fatalf("UDP port %d, TCP port %d: want one port", u, tc)
	}
	// Hold many TCP ports, then ask again: whatever port comes back has
	// both sockets (a taken TCP twin would have failed the Listen).
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
	}
	pc2, ln2, err := ListenUDPTCP("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer pc2.Close()
	defer ln2.Close()
	if pc2.LocalAddr().(*net.UDPAddr).Port != ln2.Addr().(*net.TCPAddr).Port {
		t.Fatal("the second pair is on two ports")
	}
}
