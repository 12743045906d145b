package iptables

import (
	"strings"
	"testing"
)

// TestVariablesBlockDNSServers: the DNS servers are printed as istio does,
// IPv4 (also IPv4-mapped) first, then the rest, each as written.
func TestVariablesBlockDNSServers(t *testing.T) {
	c := seedConfig()
	c.DNSServers = []string{"fd00::a", " 10.96.0.10", "::ffff:10.0.0.1", "bogus"}
	c.ProxyGID = ""
	block := c.VariablesBlock()
	for _, want := range []string{
		"\nDNS_SERVERS=[ 10.96.0.10 ::ffff:10.0.0.1],[fd00::a bogus]\n",
		"\nPROXY_GID=1337\n",
	} {
		if !strings.Contains(block, want) {
			t.Errorf("VariablesBlock lacks %q:\n%s", want, block)
		}
	}
	c.DNSServers = nil
	if block := c.VariablesBlock(); !strings.Contains(block, "\nDNS_SERVERS=[],[]\n") {
		t.Errorf("no DNS servers:\n%s", block)
	}
}
