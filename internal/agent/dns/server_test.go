package dns

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/straitmesh/strait/internal/freeport"
	"github.com/straitmesh/strait/internal/nds"
)

var meshTable = nds.NameTable{
	"reviews.demo.svc.cluster.local":  {IPs: []string{"10.96.0.20", "fd00::20"}, Registry: nds.RegistryKubernetes, Shortname: "reviews", Namespace: "demo"},
	"ratings.other.svc.cluster.local": {IPs: []string{"10.96.0.30"}, Registry: nds.RegistryKubernetes, Shortname: "ratings", Namespace: "other"},
	"api.example.com":                 {IPs: []string{"240.240.0.1"}, Registry: "External"},
	// Another cluster's domain: no short names.
	"far.demo.svc.remote.local": {IPs: []string{"10.97.0.1"}, Registry: nds.RegistryKubernetes, Shortname: "far", Namespace: "demo"},
	"bad.example.com":           {IPs: []string{"not-an-ip", "10.96.0.99"}},
	// A StatefulSet pod of a headless service, as straitd lists it.
	"db-0.db.demo.svc.cluster.local": {IPs: []string{"10.1.0.7"}, Registry: nds.RegistryKubernetes, Shortname: "db-0.db", Namespace: "demo"},
}

var podSearch = []string{"demo.svc.cluster.local.", "svc.cluster.local.", "cluster.local."}

func TestTableLookup(t *testing.T) {
	tb := buildTable(meshTable, "demo", "cluster.local")
	cases := []struct {
		qname     string
		canonical string // "" = not found
		alias     bool
	}{
		{"reviews.demo.svc.cluster.local.", "reviews.demo.svc.cluster.local.", false},
		{"REVIEWS.Demo.svc.cluster.local.", "reviews.demo.svc.cluster.local.", false},
		{"reviews.", "reviews.demo.svc.cluster.local.", false},
		{"reviews.demo.", "reviews.demo.svc.cluster.local.", false},
		{"reviews.demo.svc.", "reviews.demo.svc.cluster.local.", false},
		{"ratings.other.", "ratings.other.svc.cluster.local.", false},
		{"ratings.other.svc.", "ratings.other.svc.cluster.local.", false},
		// Another namespace's service has no bare name.
		{"ratings.", "", false},
		{"api.example.com.", "api.example.com.", false},
		{"far.demo.svc.remote.local.", "far.demo.svc.remote.local.", false},
		{"far.demo.", "", false},
		{"far.", "", false},
		// The search list applied by a resolver under ndots:5.
		{"reviews.demo.demo.svc.cluster.local.", "reviews.demo.svc.cluster.local.", true},
		{"ratings.other.demo.svc.cluster.local.", "ratings.other.svc.cluster.local.", true},
		{"api.example.com.demo.svc.cluster.local.", "api.example.com.", true},
		// Only the second search domain matches.
		{"api.example.com.svc.cluster.local.", "api.example.com.", true},
		{"ratings.demo.svc.cluster.local.", "", false},
		{"unknown.demo.svc.cluster.local.", "", false},
		{"demo.svc.cluster.local.", "", false},
		{"www.example.org.", "", false},
		// A pod's name under its headless service: the short forms too.
		{"db-0.db.demo.svc.cluster.local.", "db-0.db.demo.svc.cluster.local.", false},
		{"db-0.db.demo.", "db-0.db.demo.svc.cluster.local.", false},
		{"db-0.db.", "db-0.db.demo.svc.cluster.local.", false},
		{"db-0.db.demo.demo.svc.cluster.local.", "db-0.db.demo.svc.cluster.local.", true},
	}
	for _, tc := range cases {
		h, alias := tb.lookup(tc.qname, podSearch)
		got := ""
		if h != nil {
			got = h.canonical
		}
		if got != tc.canonical || alias != tc.alias {
			t.Errorf("lookup(%q) = %q alias %v, want %q alias %v", tc.qname, got, alias, tc.canonical, tc.alias)
		}
	}
	if h, _ := tb.lookup("bad.example.com.", nil); h == nil || len(h.v4) != 1 || h.v4[0].String() != "10.96.0.99" {
		t.Errorf("bad.example.com: %+v, want only the address that parses", h)
	}
	// Kubernetes entries whose host is not NAME.NS.svc.DOMAIN, or that lack
	// a name or namespace, get no short names.
	tb = buildTable(nds.NameTable{
		"a.demo.svc.cluster.local": {IPs: []string{"10.0.0.1"}, Registry: nds.RegistryKubernetes, Shortname: "other", Namespace: "demo"},
		"b.demo.svc.cluster.local": {IPs: []string{"10.0.0.2"}, Registry: nds.RegistryKubernetes, Shortname: "b"},
		"c.demo.svc.cluster.local": {IPs: []string{"10.0.0.3"}, Registry: nds.RegistryKubernetes, Namespace: "demo"},
		"d.demo.svc.cluster.local": {IPs: []string{"10.0.0.4"}, Shortname: "d", Namespace: "demo"},
	}, "demo", "cluster.local")
	for _, name := range []string{"a.", "other.", "a.demo.", "other.demo.", "b.", "b.demo.", "c.", "c.demo.", "d.", "d.demo."} {
		if h, _ := tb.lookup(name, nil); h != nil {
			t.Errorf("%s resolves to %s; want no short name", name, h.canonical)
		}
	}
	// A full name wins over another service's short alias.
	tb = buildTable(nds.NameTable{
		"x.demo.svc.cluster.local": {IPs: []string{"10.0.0.1"}, Registry: nds.RegistryKubernetes, Shortname: "x", Namespace: "demo"},
		"x.demo.":                  {IPs: []string{"10.0.0.2"}},
	}, "demo", "cluster.local")
	if h, _ := tb.lookup("x.demo.", nil); h == nil || h.v4[0].String() != "10.0.0.2" {
		t.Errorf("x.demo. = %+v, want the entry of that full name", h)
	}
}

// upstream is a test resolver on loopback: it answers A for
// www.example.org, NXDOMAIN for nx.example.org, SERVFAIL for
// broken.example.org, and records what it was asked.
type upstream struct {
	addr  string
	asked chan string
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{asked: make(chan string, 100)}
	h := mdns.HandlerFunc(func(w mdns.ResponseWriter, req *mdns.Msg) {
		q := req.Question[0]
		u.asked <- w.LocalAddr().Network() + " " + q.Name + " " + mdns.TypeToString[q.Qtype]
		m := new(mdns.Msg)
		m.SetReply(req)
		switch q.Name {
		case "www.example.org.":
			m.Answer = append(m.Answer, &mdns.A{Hdr: mdns.RR_Header{Name: q.Name, Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 7)})
		case "nx.example.org.":
			m.Rcode = mdns.RcodeNameError
		case "broken.example.org.":
			m.Rcode = mdns.RcodeServerFailure
		case "big.example.org.":
			for i := 1; i <= 100; i++ {
				m.Answer = append(m.Answer, &mdns.A{Hdr: mdns.RR_Header{Name: q.Name, Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, byte(i))})
			}
			if o := req.IsEdns0(); o != nil {
				m.SetEdns0(o.UDPSize(), false)
			}
			if w.LocalAddr().Network() == "udp" {
				size := mdns.MinMsgSize
				if o := req.IsEdns0(); o != nil {
					size = int(o.UDPSize())
				}
				m.Truncate(size)
			}
		}
		_ = w.WriteMsg(m)
	})
	// One port for UDP and TCP.
	pc, ln, err := freeport.ListenUDPTCP("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	u.addr = pc.LocalAddr().String()
	for _, srv := range []*mdns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}} {
		srv := srv
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		<-started
		t.Cleanup(func() { srv.Shutdown() })
	}
	return u
}

func startServer(t *testing.T, opts Options) (*Server, string) {
	t.Helper()
	opts.Addr = "127.0.0.1:0"
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	udp, tcp, err := s.Addrs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if udp.String() != tcp.String() {
		t.Fatalf("udp %s and tcp %s differ", udp, tcp)
	}
	return s, udp.String()
}

func query(t *testing.T, network, addr, name string, qtype uint16) *mdns.Msg {
	t.Helper()
	m := new(mdns.Msg)
	m.SetQuestion(name, qtype)
	c := &mdns.Client{Net: network, Timeout: 10 * time.Second}
	resp, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s %s: %v", network, name, mdns.TypeToString[qtype], err)
	}
	return resp
}

func answers(m *mdns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		switch rr := rr.(type) {
		case *mdns.A:
			out = append(out, rr.Hdr.Name+" A "+rr.A.String())
		case *mdns.AAAA:
			out = append(out, rr.Hdr.Name+" AAAA "+rr.AAAA.String())
		case *mdns.CNAME:
			out = append(out, rr.Hdr.Name+" CNAME "+rr.Target)
		default:
			out = append(out, rr.String())
		}
	}
	sort.Strings(out)
	return out
}

func TestServer(t *testing.T) {
	up := startUpstream(t)
	s, addr := startServer(t, Options{Namespace: "demo", ClusterDomain: "cluster.local", Search: podSearch, Upstreams: []string{up.addr}})
	select {
	case <-s.Ready():
		t.Fatal("ready before the first name table")
	default:
	}
	// Before the table, mesh names are forwarded.
	if r := query(t, "udp", addr, "reviews.demo.svc.cluster.local.", mdns.TypeA); r.Rcode != mdns.RcodeSuccess || len(r.Answer) != 0 {
		t.Errorf("before the table: %v", r)
	}
	if got := <-up.asked; got != "udp reviews.demo.svc.cluster.local. A" {
		t.Errorf("upstream asked %q", got)
	}
	s.UpdateNameTable(meshTable)
	select {
	case <-s.Ready():
	default:
		t.Fatal("not ready after the first name table")
	}

	cases := []struct {
		network, name string
		qtype         uint16
		rcode         int
		want          []string
		forwarded     bool
	}{
		{"udp", "reviews.demo.svc.cluster.local.", mdns.TypeA, mdns.RcodeSuccess, []string{"reviews.demo.svc.cluster.local. A 10.96.0.20"}, false},
		{"tcp", "reviews.", mdns.TypeA, mdns.RcodeSuccess, []string{"reviews. A 10.96.0.20"}, false},
		{"udp", "reviews.demo.", mdns.TypeAAAA, mdns.RcodeSuccess, []string{"reviews.demo. AAAA fd00::20"}, false},
		{"udp", "ratings.other.svc.cluster.local.", mdns.TypeAAAA, mdns.RcodeSuccess, nil, false},
		{"udp", "ratings.other.demo.svc.cluster.local.", mdns.TypeA, mdns.RcodeSuccess,
			[]string{"ratings.other.demo.svc.cluster.local. CNAME ratings.other.svc.cluster.local.", "ratings.other.svc.cluster.local. A 10.96.0.30"}, false},
		{"udp", "api.example.com.", mdns.TypeA, mdns.RcodeSuccess, []string{"api.example.com. A 240.240.0.1"}, false},
		// Not A/AAAA: forwarded even for a mesh name.
		{"udp", "reviews.demo.svc.cluster.local.", mdns.TypeTXT, mdns.RcodeSuccess, nil, true},
		{"udp", "www.example.org.", mdns.TypeA, mdns.RcodeSuccess, []string{"www.example.org. A 192.0.2.7"}, true},
		{"tcp", "www.example.org.", mdns.TypeA, mdns.RcodeSuccess, []string{"www.example.org. A 192.0.2.7"}, true},
		{"udp", "nx.example.org.", mdns.TypeA, mdns.RcodeNameError, nil, true},
		{"udp", "broken.example.org.", mdns.TypeA, mdns.RcodeServerFailure, nil, true},
		{"udp", "ratings.", mdns.TypeA, mdns.RcodeSuccess, nil, true},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s %s %s", tc.network, tc.name, mdns.TypeToString[tc.qtype]), func(t *testing.T) {
			r := query(t, tc.network, addr, tc.name, tc.qtype)
			if r.Rcode != tc.rcode {
				t.Errorf("rcode %s, want %s", mdns.RcodeToString[r.Rcode], mdns.RcodeToString[tc.rcode])
			}
			if got := answers(r); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("answers %q, want %q", got, tc.want)
			}
			select {
			case got := <-up.asked:
				want := tc.network + " " + tc.name + " " + mdns.TypeToString[tc.qtype]
				if !tc.forwarded || got != want {
					t.Errorf("upstream asked %q (forwarded %v, want %q)", got, tc.forwarded, want)
				}
			default:
				if tc.forwarded {
					t.Error("not forwarded")
				}
			}
		})
	}
}

func TestServerUpstreamDown(t *testing.T) {
	// A UDP socket that never answers, then a working upstream.
	dead, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	up := startUpstream(t)
	_, addr := startServer(t, Options{Upstreams: []string{dead.LocalAddr().String(), up.addr}, Timeout: 200 * time.Millisecond})
	if r := query(t, "udp", addr, "www.example.org.", mdns.TypeA); r.Rcode != mdns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("with the first upstream silent: %v", r)
	}
	_, addr = startServer(t, Options{Upstreams: []string{dead.LocalAddr().String()}, Timeout: 200 * time.Millisecond})
	if r := query(t, "udp", addr, "www.example.org.", mdns.TypeA); r.Rcode != mdns.RcodeServerFailure {
		t.Errorf("with no upstream answering: rcode %s, want SERVFAIL", mdns.RcodeToString[r.Rcode])
	}
}

// TestServerTruncates: an answer larger than a UDP client takes is
// truncated (TC set), and the same question over TCP gets all of it.
func TestServerTruncates(t *testing.T) {
	up := startUpstream(t)
	s, addr := startServer(t, Options{Upstreams: []string{up.addr}})
	var ips []string
	for i := 1; i <= 100; i++ {
		ips = append(ips, fmt.Sprintf("10.1.0.%d", i))
	}
	s.UpdateNameTable(nds.NameTable{"big.example.com": {IPs: ips}})
	r := query(t, "udp", addr, "big.example.com.", mdns.TypeA)
	if !r.Truncated || len(r.Answer) >= 100 {
		t.Errorf("udp: truncated %v with %d answers, want TC and fewer than 100", r.Truncated, len(r.Answer))
	}
	if r := query(t, "tcp", addr, "big.example.com.", mdns.TypeA); r.Truncated || len(r.Answer) != 100 {
		t.Errorf("tcp: truncated %v with %d answers, want all 100", r.Truncated, len(r.Answer))
	}
}

// TestServerEDNS: a UDP client that takes 4096 bytes gets the whole
// answer, local or forwarded; one that takes 512 gets it truncated.
func TestServerEDNS(t *testing.T) {
	up := startUpstream(t)
	s, addr := startServer(t, Options{Upstreams: []string{up.addr}})
	var ips []string
	for i := 1; i <= 100; i++ {
		ips = append(ips, fmt.Sprintf("10.1.0.%d", i))
	}
	s.UpdateNameTable(nds.NameTable{"big.example.com": {IPs: ips}})
	for _, name := range []string{"big.example.com.", "big.example.org."} {
		m := new(mdns.Msg)
		m.SetQuestion(name, mdns.TypeA)
		m.SetEdns0(4096, false)
		c := &mdns.Client{Net: "udp", Timeout: 10 * time.Second, UDPSize: 4096}
		r, _, err := c.Exchange(m, addr)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Truncated || len(r.Answer) != 100 {
			t.Errorf("%s with EDNS 4096: truncated %v, %d answers; want all 100", name, r.Truncated, len(r.Answer))
		}
		if r := query(t, "udp", addr, name, mdns.TypeA); !r.Truncated || len(r.Answer) >= 100 {
			t.Errorf("%s without EDNS: truncated %v with %d answers, want TC", name, r.Truncated, len(r.Answer))
		}
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("no upstream: no error")
	}
	if _, err := New(Options{Upstreams: []string{"10.0.0.1"}}); err == nil {
		t.Error("upstream without port: no error")
	}
}

func TestReadResolvConf(t *testing.T) {
	p := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(p, []byte("search demo.svc.cluster.local svc.cluster.local\nnameserver 10.96.0.10\nnameserver fd00::a\noptions ndots:5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rc, err := ReadResolvConf(p)
	if err != nil {
		t.Fatal(err)
	}
	want := ResolvConf{Servers: []string{"10.96.0.10:53", "[fd00::a]:53"}, Search: []string{"demo.svc.cluster.local", "svc.cluster.local"}}
	if !reflect.DeepEqual(rc, want) {
		t.Errorf("got %+v, want %+v", rc, want)
	}
	if _, err := ReadResolvConf(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("missing file: no error")
	}
}
