package dnsresolver

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/miekg/dns"
)

// An answer's address records of the type asked count, whatever their
// owner (a CNAME chain), with the smallest TTL; others are skipped.
func TestAnswerAddrs(t *testing.T) {
	hdr := func(name string, ttl uint32, typ uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: typ, Class: dns.ClassINET, Ttl: ttl}
	}
	resp := &dns.Msg{Answer: []dns.RR{
		&dns.CNAME{Hdr: hdr("a.test.", 5, dns.TypeCNAME), Target: "b.test."},
		&dns.A{Hdr: hdr("b.test.", 30, dns.TypeA), A: net.ParseIP("10.0.0.1")},
		&dns.A{Hdr: hdr("b.test.", 20, dns.TypeA), A: net.ParseIP("10.0.0.2")},
		&dns.AAAA{Hdr: hdr("b.test.", 1, dns.TypeAAAA), AAAA: net.ParseIP("fd00::1")},
	}}
	res := answerAddrs(resp, dns.TypeA)
	want := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")}
	if !slices.Equal(res.Addrs, want) || res.TTL != 20*time.Second {
		t.Errorf("A answer = %v ttl %v, want %v ttl 20s", res.Addrs, res.TTL, want)
	}
	res = answerAddrs(resp, dns.TypeAAAA)
	if len(res.Addrs) != 1 || res.Addrs[0] != netip.MustParseAddr("fd00::1") || res.TTL != time.Second {
		t.Errorf("AAAA answer = %v ttl %v", res.Addrs, res.TTL)
	}
}

func TestMinTTL(t *testing.T) {
	for _, c := range []struct{ a, b, want time.Duration }{{0, 5, 5}, {5, 0, 5}, {3, 5, 3}, {5, 3, 3}, {0, 0, 0}} {
		if got := MinTTL(c.a, c.b); got != c.want {
			t.Errorf("MinTTL(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// An IP literal is its own answer, whatever the family, with no query.
func TestLookupLiteral(t *testing.T) {
	r := &Resolver{Servers: []string{"127.0.0.1:1"}, Timeout: time.Millisecond, Tries: 1}
	res, err := r.Lookup(context.Background(), "10.9.9.9", clusterv3.Cluster_V6_ONLY)
	if err != nil || len(res.Addrs) != 1 || res.Addrs[0] != netip.MustParseAddr("10.9.9.9") {
		t.Errorf("literal = %v, %v", res.Addrs, err)
	}
}
