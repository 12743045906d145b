package listener

import (
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
)

// A reservation binds without listening, on IPv4 and IPv6, with and
// without IP(V6)_TRANSPARENT; listen hands the socket over once, and a
// client then connects to it.
func TestReserveThenListen(t *testing.T) {
	for _, tc := range []struct {
		addr        string
		transparent bool
	}{
		{"127.0.0.1:0", false},
		{"127.0.0.1:0", true},
		{"[::1]:0", false},
		{"[::1]:0", true},
	} {
		if tc.transparent && os.Geteuid() != 0 {
			t.Logf("%s transparent: needs CAP_NET_ADMIN, not tested as uid %d", tc.addr, os.Geteuid())
			continue
		}
		r, err := reserve(netip.MustParseAddrPort(tc.addr), tc.transparent)
		if err != nil {
			if strings.Contains(tc.addr, "::1") && strings.Contains(err.Error(), "bind") {
				t.Logf("%s: no IPv6 loopback here: %v", tc.addr, err)
				continue
			}
			t.Fatalf("reserve(%s, transparent %v): %v", tc.addr, tc.transparent, err)
		}
		ln, err := r.listen()
		if err != nil {
			r.close()
			t.Fatalf("%s transparent %v: listen: %v", tc.addr, tc.transparent, err)
		}
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			c.Close()
		}
		if _, lerr := r.listen(); lerr == nil || !strings.Contains(lerr.Error(), "is closed") {
			t.Errorf("%s: second listen: %v, want the reservation closed", tc.addr, lerr)
		}
		r.close() // used up: nothing more to close
		ln.Close()
		if err != nil {
			t.Errorf("%s transparent %v: connect: %v", tc.addr, tc.transparent, err)
		}
	}
}

// close frees the descriptor once: a closed reservation refuses to listen
// and closing it again touches no descriptor.
func TestReservationCloseTwice(t *testing.T) {
	r, err := reserve(netip.MustParseAddrPort("127.0.0.1:0"), false)
	if err != nil {
		t.Fatal(err)
	}
	r.close()
	if r.fd != -1 {
		t.Fatalf("closed reservation holds descriptor %d, want -1", r.fd)
	}
	r.close()
	if r.fd != -1 {
		t.Fatalf("reservation closed twice holds descriptor %d, want -1", r.fd)
	}
	if _, err := r.listen(); err == nil || !strings.Contains(err.Error(), "is closed") {
		t.Errorf("listen on a closed reservation: %v, want it refused as closed", err)
	}
}
