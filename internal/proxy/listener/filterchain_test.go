package listener

import (
	"encoding/json"
	"net/netip"
	"os"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

func cidr(prefix string, bits uint32) *corev3.CidrRange {
	return &corev3.CidrRange{AddressPrefix: prefix, PrefixLen: wrapperspb.UInt32(bits)}
}

// namedChain is tcpChain with the chain named after its
// cluster.
func namedChain(t *testing.T, name string, m *listenerv3.FilterChainMatch) *listenerv3.FilterChain {
	c := tcpChain(t, name, m)
	c.Name = name
	return c
}

// TestMatchSourcePrefixRanges: source_prefix_ranges choose among the
// chains left by the destination levels, longest prefix first; a source in
// none of them falls to the chains without source ranges, then to the
// default chain.
func TestMatchSourcePrefixRanges(t *testing.T) {
	l, err := Build(&listenerv3.Listener{Name: "src", Address: addr("127.0.0.1:1"), FilterChains: []*listenerv3.FilterChain{
		namedChain(t, "wide", &listenerv3.FilterChainMatch{SourcePrefixRanges: []*corev3.CidrRange{cidr("10.0.0.0", 8)}}),
		namedChain(t, "narrow", &listenerv3.FilterChainMatch{SourcePrefixRanges: []*corev3.CidrRange{cidr("10.1.0.0", 16), cidr("192.168.7.7", 32)}}),
		namedChain(t, "dst", &listenerv3.FilterChainMatch{PrefixRanges: []*corev3.CidrRange{cidr("240.0.0.9", 32)}}),
		namedChain(t, "dst-src", &listenerv3.FilterChainMatch{
			PrefixRanges:       []*corev3.CidrRange{cidr("240.0.0.9", 32)},
			SourcePrefixRanges: []*corev3.CidrRange{cidr("10.1.2.3", 32)},
		}),
		namedChain(t, "default", nil),
	}}, Deps{Stats: stats.New()})
	if err != nil {
		t.Fatal(err)
	}
	dst := netip.MustParseAddrPort("240.0.0.1:80")
	dstNine := netip.MustParseAddrPort("240.0.0.9:80")
	for _, tc := range []struct {
		dst  netip.AddrPort
		src  string
		want string
	}{
		{dst, "10.9.9.9", "wide"},
		{dst, "10.1.9.9", "narrow"},
		{dst, "192.168.7.7", "narrow"},
		{dst, "::ffff:10.1.9.9", "narrow"},
		{dst, "192.168.7.8", "default"},
		{dst, "11.0.0.1", "default"},
		// The destination level comes first: at 240.0.0.9 only the
		// chains naming it compete on the source.
		{dstNine, "10.1.2.3", "dst-src"},
		{dstNine, "10.9.9.9", "dst"},
	} {
		src := netip.MustParseAddr(tc.src)
		if got := l.match(tc.dst, src, inspection{}); got == nil || got.name != tc.want {
			t.Errorf("match(%s from %s) = %v, want %s", tc.dst, tc.src, got, tc.want)
		}
	}
	if got := l.match(dst, netip.Addr{}, inspection{}); got == nil || got.name != "default" {
		t.Errorf("a connection without an IP source matched %v, want default", got)
	}
}

func TestSourcePrefixRangesRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		m    *listenerv3.FilterChainMatch
		want string
	}{
		"not an IP":          {&listenerv3.FilterChainMatch{SourcePrefixRanges: []*corev3.CidrRange{{AddressPrefix: "ten"}}}, `filter_chain_match.source_prefix_ranges: "ten" is not an IP address`},
		"prefix too long":    {&listenerv3.FilterChainMatch{SourcePrefixRanges: []*corev3.CidrRange{cidr("10.0.0.0", 33)}}, "filter_chain_match.source_prefix_ranges: 10.0.0.0/33"},
		"direct source":      {&listenerv3.FilterChainMatch{DirectSourcePrefixRanges: []*corev3.CidrRange{cidr("10.0.0.0", 8)}}, "filter_chain_match.direct_source_prefix_ranges is not supported"},
		"source ports":       {&listenerv3.FilterChainMatch{SourcePorts: []uint32{5}}, "filter_chain_match.source_ports is not supported"},
		"destination prefix": {&listenerv3.FilterChainMatch{PrefixRanges: []*corev3.CidrRange{{AddressPrefix: "x"}}}, `filter_chain_match.prefix_ranges: "x"`},
	} {
		_, err := Build(&listenerv3.Listener{Name: "x", Address: addr("127.0.0.1:1"), FilterChains: []*listenerv3.FilterChain{namedChain(t, "c", tc.m)}}, Deps{Stats: stats.New()})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", name, err, tc.want)
		}
	}
}

// TestSourceRangesAloneAreNotDefault: a chain with only source ranges
// can sit next to a chain without a match, which takes the other sources.
func TestSourceRangesAloneAreNotDefault(t *testing.T) {
	l, err := Build(&listenerv3.Listener{Name: "x", Address: addr("127.0.0.1:1"), FilterChains: []*listenerv3.FilterChain{
		namedChain(t, "src", &listenerv3.FilterChainMatch{SourcePrefixRanges: []*corev3.CidrRange{cidr("10.0.0.0", 8)}}),
		namedChain(t, "default", nil),
	}}, Deps{Stats: stats.New()})
	if err != nil {
		t.Fatalf("a source-ranged chain next to one without a match: %v", err)
	}
	dst := netip.MustParseAddrPort("192.0.2.1:80")
	for src, want := range map[string]string{"10.1.2.3": "src", "11.1.2.3": "default"} {
		if c := l.match(dst, netip.MustParseAddr(src), inspection{}); c == nil || c.name != want {
			t.Errorf("source %s: chain %v, want %s", src, c, want)
		}
	}
}

func TestPeerAddr(t *testing.T) {
	client, server := tcpPair(t)
	if got := peerAddr(server); got != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("peerAddr = %v, want 127.0.0.1 (the client %v)", got, client.LocalAddr())
	}
}

// TestBuildGeneratedSourceSubnetListener builds the listeners straitd
// generates for the Sidecar scenario (its golden files: egress and ingress
// listeners, bound ones among them), and checks the one of a tcp route
// matched on sourceSubnet: the client's own address goes to subset v2,
// another client to v1.
func TestBuildGeneratedSourceSubnetListener(t *testing.T) {
	var docs []json.RawMessage
	for _, pod := range []string{"client", "server-v2"} {
		raw, err := os.ReadFile("../../xds/gen/testdata/sidecar/golden/" + pod + ".listeners.json")
		if err != nil {
			t.Fatal(err)
		}
		var more []json.RawMessage
		if err := json.Unmarshal(raw, &more); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, more...)
	}
	var db *Listener
	for _, d := range docs {
		var l listenerv3.Listener
		if err := protojson.Unmarshal(d, &l); err != nil {
			t.Fatal(err)
		}
		b, err := Build(&l, Deps{Stats: stats.New()})
		if err != nil {
			t.Fatalf("strait-proxy refuses what straitd generates: %v", err)
		}
		if b.Name == "240.240.9.1_5432" {
			db = b
		}
	}
	if db == nil {
		t.Fatal("no listener 240.240.9.1_5432")
	}
	dst := netip.MustParseAddrPort("240.240.9.1:5432")
	for src, want := range map[string]string{
		"10.93.0.10": "outbound|5432|v2|db.side.svc.cluster.local",
		"10.93.1.7":  "outbound|5432|v2|db.side.svc.cluster.local",
		"10.93.0.11": "outbound|5432|v1|db.side.svc.cluster.local",
	} {
		c := db.match(dst, netip.MustParseAddr(src), inspection{})
		if c == nil || c.tcp == nil || c.tcp.StatPrefix != want { // straitd names the stat prefix after the cluster
			t.Errorf("from %s: chain %+v, want tcp_proxy to %s", src, c, want)
		}
	}
}

// TestSourceRangeZeroBits: a /0 source range matches every source (a
// prefix length of 0 is a match, not "no match"), and wins over the
// chains without source ranges.
func TestSourceRangeZeroBits(t *testing.T) {
	l, err := Build(&listenerv3.Listener{Name: "x", Address: addr("127.0.0.1:1"), FilterChains: []*listenerv3.FilterChain{
		namedChain(t, "any-source", &listenerv3.FilterChainMatch{SourcePrefixRanges: []*corev3.CidrRange{cidr("0.0.0.0", 0)}}),
		namedChain(t, "default", nil),
	}}, Deps{Stats: stats.New()})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.match(netip.MustParseAddrPort("10.0.0.1:80"), netip.MustParseAddr("11.0.0.1"), inspection{}); got == nil || got.name != "any-source" {
		t.Errorf("a source under 0.0.0.0/0 matched %v, want any-source", got)
	}
}
