package forward

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/route"
)

// hopHashRoutes compiles routes /none (no hash_policy), /header (x-user),
// /source (connection_properties.source_ip) and /cookie (a generated
// cookie with a ttl), all to cluster "be".
func hopHashRoutes(t *testing.T) map[string]*route.Route {
	t.Helper()
	mk := func(path string, hp ...*routev3.RouteAction_HashPolicy) *routev3.Route {
		return &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: path}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "be"}, HashPolicy: hp}}}
	}
	table, err := route.Compile(&routev3.RouteConfiguration{Name: "r", VirtualHosts: []*routev3.VirtualHost{{
		Name: "all", Domains: []string{"*"},
		Routes: []*routev3.Route{
			mk("/none"),
			mk("/header", &routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_Header_{
				Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: "x-user"}}}),
			mk("/source", &routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_ConnectionProperties_{
				ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true}}}),
			mk("/cookie", &routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_Cookie_{
				Cookie: &routev3.RouteAction_HashPolicy_Cookie{Name: "sticky", Ttl: durationpb.New(time.Hour)}}}),
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*route.Route{}
	for _, p := range []string{"/none", "/header", "/source", "/cookie"} {
		rt := table.Match("example.com", p, http.Header{})
		if rt == nil {
			t.Fatalf("no route for %s", p)
		}
		out[p] = rt
	}
	if out["/none"].Hash != nil || out["/header"].Hash == nil {
		t.Fatal("hash policies not compiled as expected")
	}
	return out
}

// hopConnPair is a connected TCP pair on loopback: the proxy's side (the
// accepted connection) and the client's.
func hopConnPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return server, client
}

// TestRequestHash: no hash_policy, no hash; otherwise the route's policy
// hashes the request's headers, query and the connection's addresses
// (source_ip: the peer, unless the HCM's remote address is given).
func TestRequestHash(t *testing.T) {
	rts := hopHashRoutes(t)
	nc, _ := hopConnPair(t)
	peer := nc.RemoteAddr().(*net.TCPAddr).AddrPort()
	local := nc.LocalAddr().(*net.TCPAddr).AddrPort()
	hdr := route.HTTPHeader(http.Header{"X-User": {"alice"}})

	if h, ok, c := RequestHash(rts["/none"], hdr, "", nc, netip.AddrPort{}); h != 0 || ok || c != "" {
		t.Errorf("no hash_policy: %d %v %q, want none", h, ok, c)
	}
	for _, c := range []struct {
		path   string
		remote netip.AddrPort
		in     route.HashInput
	}{
		{"/header", netip.AddrPort{}, route.HashInput{Headers: hdr}},
		{"/source", netip.AddrPort{}, route.HashInput{Source: peer}},
		{"/source", netip.MustParseAddrPort("192.0.2.7:0"), route.HashInput{Remote: netip.MustParseAddrPort("192.0.2.7:0")}},
		{"/cookie", netip.AddrPort{}, route.HashInput{Headers: hdr, Source: peer, Local: local}},
	} {
		wh, wok, wc := rts[c.path].Hash.Hash(c.in)
		if !wok {
			t.Fatalf("%s: the expected input yields no hash", c.path)
		}
		h, ok, cookie := RequestHash(rts[c.path], hdr, "", nc, c.remote)
		if h != wh || !ok || cookie != wc {
			t.Errorf("%s remote %v: %d %v %q, want %d true %q", c.path, c.remote, h, ok, cookie, wh, wc)
		}
	}
	// The client's address differs from 192.0.2.7's: source_ip sees the
	// remote address the HCM gives.
	a, _, _ := RequestHash(rts["/source"], hdr, "", nc, netip.AddrPort{})
	b, _, _ := RequestHash(rts["/source"], hdr, "", nc, netip.MustParseAddrPort("192.0.2.7:0"))
	if a == b {
		t.Error("source_ip: the remote address did not change the hash")
	}
}

// TestRequestHashHTTP: as TestRequestHash, from an http.Request: the
// source is RemoteAddr, the local address the server's context value.
func TestRequestHashHTTP(t *testing.T) {
	rts := hopHashRoutes(t)
	r := httptest.NewRequest(http.MethodGet, "/header?q=1", nil)
	r.RemoteAddr = "198.51.100.4:5555"
	r.Header.Set("X-User", "bob")
	localAddr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 9), Port: 8080}
	r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(localAddr)))

	if h, ok, c := RequestHashHTTP(rts["/none"], r, netip.AddrPort{}); h != 0 || ok || c != "" {
		t.Errorf("no hash_policy: %d %v %q, want none", h, ok, c)
	}
	hdr := route.HTTPHeader(r.Header)
	src := netip.MustParseAddrPort("198.51.100.4:5555")
	for _, path := range []string{"/header", "/source", "/cookie"} {
		wh, wok, wc := rts[path].Hash.Hash(route.HashInput{Headers: hdr, Query: "q=1", Source: src, Local: localAddr.AddrPort()})
		h, ok, c := RequestHashHTTP(rts[path], r, netip.AddrPort{})
		if !wok || h != wh || !ok || c != wc {
			t.Errorf("%s: %d %v %q, want %d %v %q", path, h, ok, c, wh, wok, wc)
		}
	}
	// Without the server's local address the generated cookie differs.
	bare := httptest.NewRequest(http.MethodGet, "/cookie", nil)
	bare.RemoteAddr = r.RemoteAddr
	_, _, withLocal := RequestHashHTTP(rts["/cookie"], r, netip.AddrPort{})
	_, _, without := RequestHashHTTP(rts["/cookie"], bare, netip.AddrPort{})
	if withLocal == "" || withLocal == without {
		t.Errorf("generated cookies %q and %q: the local address is not part of it", withLocal, without)
	}
}
