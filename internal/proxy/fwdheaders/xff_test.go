package fwdheaders

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/proxy/http1"
)

// TestXFFAddress reads x-forwarded-for as Envoy's getLastAddressFromXFF:
// the entry skip places from the right, spaces ignored, nothing when the
// list is short or the entry is not an address.
func TestXFFAddress(t *testing.T) {
	for _, tc := range []struct {
		v    string
		has  bool
		skip uint32
		want string // "" for none
	}{
		{"", false, 0, ""},
		{"", true, 0, ""},
		{"1.2.3.4", true, 0, "1.2.3.4"},
		{" 1.2.3.4 ", true, 0, "1.2.3.4"},
		{"1.2.3.4,5.6.7.8", true, 0, "5.6.7.8"},
		{"1.2.3.4, 5.6.7.8", true, 1, "1.2.3.4"},
		{"1.2.3.4, 5.6.7.8, 9.9.9.9", true, 1, "5.6.7.8"},
		{"1.2.3.4, 5.6.7.8, 9.9.9.9", true, 2, "1.2.3.4"},
		{"1.2.3.4, 5.6.7.8", true, 2, ""}, // more trusted hops than entries
		{"1.2.3.4", true, 1, ""},
		{"1.2.3.4", true, 1000, ""},
		{"2001:db8::1", true, 0, "2001:db8::1"},
		{"1.2.3.4, 2001:db8::1", true, 0, "2001:db8::1"},
		{"2001:db8::1, 1.2.3.4", true, 1, "2001:db8::1"},
		{"::ffff:1.2.3.4", true, 0, "1.2.3.4"},
		{"[2001:db8::1]", true, 0, ""},  // brackets are not an address
		{"1.2.3.4:80", true, 0, ""},     // nor is a port
		{"fe80::1%eth0", true, 0, ""},   // nor a zone
		{"unknown", true, 0, ""},        // RFC 7239 obfuscated
		{"1.2.3.4, bogus", true, 0, ""}, // the last is bad: no fallback to an earlier one
		{"bogus, 1.2.3.4", true, 0, "1.2.3.4"},
		{"1.2.3.4,", true, 0, ""},        // empty last entry
		{"01.2.3.4", true, 0, ""},        // leading zero
		{"1.2.3.4 5.6.7.8", true, 0, ""}, // no comma
	} {
		got, ok := xffAddress(tc.v, tc.has, tc.skip)
		gs := ""
		if ok {
			gs = got.String()
		}
		if gs != tc.want {
			t.Errorf("xffAddress(%q, %v, %d) = %q, want %q", tc.v, tc.has, tc.skip, gs, tc.want)
		}
	}
}

// TestXFFResolve applies each policy to x-forwarded-for shapes: the
// remote address, what is appended and x-envoy-external-address.
func TestXFFResolve(t *testing.T) {
	peer := netip.MustParseAddrPort("198.51.100.7:41000")
	peer6 := netip.MustParseAddrPort("[2001:db8::7]:41000")
	loop := netip.MustParseAddrPort("127.0.0.1:41000")
	loop6 := netip.MustParseAddrPort("[::1]:41000")
	local := netip.MustParseAddr("192.0.2.1")
	var (
		transparent = XFF{}
		trust1      = XFF{trustedHops: 1}
		edge        = XFF{useRemote: true}
		edge1       = XFF{useRemote: true, trustedHops: 1}
		edge2       = XFF{useRemote: true, trustedHops: 2}
		edgeSkip    = XFF{useRemote: true, skipAppend: true}
	)
	for _, tc := range []struct {
		name     string
		p        XFF
		xff      string // "-" for no header
		peer     netip.AddrPort
		remote   string
		appended string // "" for none
		external string // "" for none
	}{
		{"transparent, no header: the peer", transparent, "-", peer, "198.51.100.7:41000", "", ""},
		{"transparent: the last entry", transparent, "203.0.113.1, 203.0.113.2", peer, "203.0.113.2:0", "", ""},
		{"transparent, IPv6 entry", transparent, "2001:db8::9", peer, "[2001:db8::9]:0", "", ""},
		{"transparent, bad entry: the peer", transparent, "not-an-ip", peer, "198.51.100.7:41000", "", ""},
		{"transparent, 1 hop: second from the right", trust1, "203.0.113.1, 203.0.113.2", peer, "203.0.113.1:0", "", ""},
		{"transparent, 1 hop, short list: the peer", trust1, "203.0.113.2", peer, "198.51.100.7:41000", "", ""},
		{"edge: the peer, appended", edge, "203.0.113.1", peer, "198.51.100.7:41000", "198.51.100.7", "198.51.100.7"},
		{"edge, no header", edge, "-", peer, "198.51.100.7:41000", "198.51.100.7", "198.51.100.7"},
		{"edge, IPv6 peer", edge, "-", peer6, "[2001:db8::7]:41000", "2001:db8::7", "2001:db8::7"},
		{"edge, loopback peer: the local address appended", edge, "-", loop, "127.0.0.1:41000", "192.0.2.1", "127.0.0.1"},
		{"edge, IPv6 loopback peer", edge, "-", loop6, "[::1]:41000", "192.0.2.1", "::1"},
		{"edge, 1 hop: the last entry", edge1, "203.0.113.1, 203.0.113.2", peer, "203.0.113.2:0", "198.51.100.7", "203.0.113.2"},
		{"edge, 2 hops", edge2, "203.0.113.1, 203.0.113.2", peer, "203.0.113.1:0", "198.51.100.7", "203.0.113.1"},
		{"edge, 2 hops, short list: the peer", edge2, "203.0.113.2", peer, "198.51.100.7:41000", "198.51.100.7", "198.51.100.7"},
		{"edge, 1 hop, no header: the peer", edge1, "-", peer, "198.51.100.7:41000", "198.51.100.7", "198.51.100.7"},
		{"edge, 1 hop, bad entry: the peer", edge1, "203.0.113.1, x", peer, "198.51.100.7:41000", "198.51.100.7", "198.51.100.7"},
		{"edge, skip_xff_append", edgeSkip, "203.0.113.1", peer, "198.51.100.7:41000", "", "198.51.100.7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			xff, has := tc.xff, tc.xff != "-"
			if !has {
				xff = ""
			}
			ca := tc.p.resolve(xff, has, tc.peer, local)
			str := func(a netip.Addr) string {
				if !a.IsValid() {
					return ""
				}
				return a.String()
			}
			if ca.Remote.String() != tc.remote || str(ca.appended) != tc.appended || str(ca.external) != tc.external {
				t.Errorf("remote %s appended %q external %q, want %s %q %q", ca.Remote, str(ca.appended), str(ca.external), tc.remote, tc.appended, tc.external)
			}
		})
	}
}

func TestAppendXFF(t *testing.T) {
	a := netip.MustParseAddr("2001:db8::1")
	for _, tc := range []struct {
		v    string
		has  bool
		want string
	}{
		{"", false, "2001:db8::1"},
		{"", true, "2001:db8::1"},
		{"1.2.3.4", true, "1.2.3.4,2001:db8::1"},
		{"1.2.3.4, 5.6.7.8", true, "1.2.3.4, 5.6.7.8,2001:db8::1"},
	} {
		if got := appendXFF(tc.v, tc.has, a); got != tc.want {
			t.Errorf("appendXFF(%q) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// RemoveHeader removes every field of the name, whatever its case and
// place, keeps the others in order, and leaves hs as it was when there is
// none.
func TestRemoveHeader(t *testing.T) {
	h := func(names ...string) http1.Headers {
		var hs http1.Headers
		for _, n := range names {
			hs = append(hs, http1.Header{Name: []byte(n), Value: []byte("v-" + n)})
		}
		return hs
	}
	names := func(hs http1.Headers) string {
		var s []string
		for _, f := range hs {
			s = append(s, string(f.Name)+"="+string(f.Value))
		}
		return strings.Join(s, ",")
	}
	for _, c := range []struct {
		in   http1.Headers
		want string
	}{
		{h(), ""},
		{h("a", "b"), "a=v-a,b=v-b"},
		{h("x-peer"), ""},
		{h("X-Peer", "a", "x-peer", "b", "X-PEER"), "a=v-a,b=v-b"},
		{h("a", "b", "x-peer"), "a=v-a,b=v-b"},
		{h("x-peer", "a", "b"), "a=v-a,b=v-b"},
		{h("a", "x-peer", "b", "x-peers"), "a=v-a,b=v-b,x-peers=v-x-peers"},
	} {
		in := names(c.in)
		if got := names(RemoveHeader(c.in, "x-peer")); got != c.want {
			t.Errorf("RemoveHeader(%s) = %s, want %s", in, got, c.want)
		}
	}
}

// externalStripped names Envoy's x-envoy-* request headers that a
// request from outside loses, in any case; the rest, and names that
// only start or end like one, stay.
func TestExternalStripped(t *testing.T) {
	for _, tc := range []struct {
		name        string
		edge, inner bool // stripped at the edge (useRemote), inside
	}{
		{"x-envoy-retriable-status-codes", true, true},
		{"X-Envoy-Retriable-Header-Names", true, true},
		{"x-envoy-upstream-alt-stat-name", true, true},
		{"x-envoy-upstream-rq-timeout-alt-response", true, true},
		{"x-envoy-expected-rq-timeout-ms", true, true},
		{"X-ENVOY-FORCE-TRACE", true, true},
		{"x-envoy-ip-tags", true, true},
		{"x-envoy-original-url", true, true},
		{"x-envoy-hedge-on-per-try-timeout", true, true},
		{"x-envoy-internal", true, true},
		{"x-envoy-decorator-operation", true, false},
		{"X-Envoy-Downstream-Service-Cluster", true, false},
		{"x-envoy-downstream-service-node", true, false},
		{"x-envoy-peer-metadata", false, false},
		{"x-envoy-peer-metadata-id", false, false},
		{"x-envoy-internalx", false, false},
		{"x-envoy-interna", false, false},
		{"x-envoy-", false, false},
		{"internal", false, false},
		{"x-envoyinternal", false, false},
	} {
		if got := externalStripped(tc.name, true); got != tc.edge {
			t.Errorf("externalStripped(%q, edge) = %v", tc.name, got)
		}
		if got := externalStripped(tc.name, false); got != tc.inner {
			t.Errorf("externalStripped(%q, inside) = %v", tc.name, got)
		}
	}
}
