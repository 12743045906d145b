package iptables

import (
	"net/netip"
	"strings"
)

// Chains created by the rules.
const (
	ChainInbound    = "ISTIO_INBOUND"     // nat (REDIRECT) or mangle (TPROXY): inbound capture
	ChainRedirect   = "ISTIO_REDIRECT"    // nat: to the proxy port (15001)
	ChainInRedirect = "ISTIO_IN_REDIRECT" // nat: to the inbound capture port (15006)
	ChainOutput     = "ISTIO_OUTPUT"      // nat: what locally generated traffic does
	ChainDivert     = "ISTIO_DIVERT"      // mangle, TPROXY: mark and accept established inbound
	ChainTProxy     = "ISTIO_TPROXY"      // mangle, TPROXY: new inbound to the capture port
)

// chainPrefix marks the chains this package owns; applying clears every
// chain with this prefix and every jump into one before adding the rules
// again, and cleanup deletes them.
const chainPrefix = "ISTIO_"

// OwnerComment tags the rules this package adds to built-in chains that do
// not jump into an ISTIO_* chain (TPROXY's CONNMARK and MARK rules, DNS,
// --drop-invalid, -c/-k interface rules), as `-m comment --comment strait`,
// so that re-applying and --cleanup-only find exactly them and nothing
// else without keeping state.
const OwnerComment = "strait"

var builtinChains = map[string]bool{
	"PREROUTING": true, "INPUT": true, "FORWARD": true, "OUTPUT": true, "POSTROUTING": true,
}

// Family is an address family: IPv4 rules go to iptables, IPv6 rules to
// ip6tables.
type Family int

// Address families.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

func (f Family) String() string {
	if f == IPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// Rule is one iptables rule: "-A CHAIN params..." in TABLE.
type Rule struct {
	Table  string
	Chain  string
	Params []string
}

// String is the rule as iptables-restore (and iptables-save) write it.
func (r Rule) String() string {
	return "-A " + r.Chain + " " + strings.Join(r.Params, " ")
}

// Rules is an ordered rule set for one address family, in the order
// istio-iptables 1.14 leaves them in each chain. It is immutable once built.
type Rules struct {
	rules []Rule
}

// List returns a copy of the rules in order.
func (rs Rules) List() []Rule { return append([]Rule(nil), rs.rules...) }

// Empty says whether there are no rules.
func (rs Rules) Empty() bool { return len(rs.rules) == 0 }

// restoreTables is the order tables appear in iptables-restore input.
var restoreTables = []string{"filter", "mangle", "nat", "raw"}

// Tables returns the tables the rules touch, in iptables-restore order.
func (rs Rules) Tables() []string {
	var out []string
	for _, t := range restoreTables {
		for _, r := range rs.rules {
			if r.Table == t {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// Chains returns the user-defined chains of table, in order of first use.
func (rs Rules) Chains(table string) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rs.rules {
		if r.Table == table && !builtinChains[r.Chain] && !seen[r.Chain] {
			seen[r.Chain] = true
			out = append(out, r.Chain)
		}
	}
	return out
}

// String renders the rules as istio-iptables does in its log ("Writing
// following contents to rules file"): per table, "-N" for each new chain,
// then the rules, then COMMIT. This is the --dry-run output; for Istio's
// injected arguments the nat block is line for line istio-iptables' own. Feed it to
// `iptables-restore --noflush` only on a table without ISTIO_* chains; Install
// uses RestoreInput, which is safe to run again.
func (rs Rules) String() string {
	var b strings.Builder
	for _, table := range rs.Tables() {
		b.WriteString("* " + table + "\n")
		for _, c := range rs.Chains(table) {
			b.WriteString("-N " + c + "\n")
		}
		rs.writeRules(&b, table)
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

func (rs Rules) writeRules(b *strings.Builder, table string) {
	for _, r := range rs.rules {
		if r.Table == table {
			b.WriteString(r.String() + "\n")
		}
	}
}

// RouteProtocol is the routing protocol number Strait's policy-routing
// entries carry (`ip rule ... protocol 76`, `ip route ... proto 76`; 76 is
// not assigned in rt_protos), so that re-applying and --cleanup-only find
// exactly them.
const RouteProtocol = "76"

// PolicyRoute is TPROXY's policy routing for one family: packets marked
// Mark are looked up in Table, whose only route delivers everything
// locally (istio-init's `ip -f inet rule add fwmark 1337 lookup 133` and
// `ip -f inet route add local default dev lo table 133`).
type PolicyRoute struct {
	Family Family
	Mark   string
	Table  string
}

func (r PolicyRoute) familyFlag() string {
	if r.Family == IPv6 {
		return "-6"
	}
	return "-4"
}

// RuleArgs are the `ip` arguments that add the rule.
func (r PolicyRoute) RuleArgs() []string {
	return []string{r.familyFlag(), "rule", "add", "fwmark", r.Mark, "lookup", r.Table, "protocol", RouteProtocol}
}

// RouteArgs are the `ip` arguments that add (or replace) the route.
func (r PolicyRoute) RouteArgs() []string {
	return []string{r.familyFlag(), "route", "replace", "local", "default", "dev", "lo", "table", r.Table, "proto", RouteProtocol}
}

// Plan is everything a Config asks for: the iptables rules of each family,
// TPROXY's policy routing, and the addresses added to lo.
type Plan struct {
	IPv4 Rules
	// IPv6 captures IPv6 like IPv4 with --dual-stack; without it, it is
	// the guard that refuses IPv6 (IPv6Guard is set; see buildIPv6Guard).
	IPv6 Rules
	// IPv6Guard says that IPv6 holds only the guard: Install may leave it
	// out where the namespace has no IPv6 at all (ip6tables unusable and
	// no inet6 address), since then there is nothing to guard.
	IPv6Guard bool
	Routes    []PolicyRoute
	// LoopbackAddrs are added to lo: ::6/128 with --dual-stack, the source
	// the proxy binds for inbound passthrough (IPv4's 127.0.0.6 is in
	// 127/8 and needs nothing).
	LoopbackAddrs []netip.Prefix
}

// Rules returns the rules of family f.
func (p Plan) Rules(f Family) Rules {
	if f == IPv6 {
		return p.IPv6
	}
	return p.IPv4
}

// String is the --dry-run output: the IPv4 iptables-restore input as
// istio-iptables logs it, then, when there is any, the ip6tables input and
// the `ip` commands, each after a "#" header line.
func (p Plan) String() string {
	var b strings.Builder
	b.WriteString(p.IPv4.String())
	if !p.IPv6.Empty() {
		b.WriteString("# ip6tables-restore --noflush\n")
		b.WriteString(p.IPv6.String())
	}
	if len(p.Routes) > 0 || len(p.LoopbackAddrs) > 0 {
		b.WriteString("# ip\n")
		for _, r := range p.Routes {
			b.WriteString("ip " + strings.Join(r.RuleArgs(), " ") + "\n")
			b.WriteString("ip " + strings.Join(r.RouteArgs(), " ") + "\n")
		}
		for _, a := range p.LoopbackAddrs {
			b.WriteString("ip " + strings.Join(addrArgs("add", a), " ") + "\n")
		}
	}
	return b.String()
}

func addrArgs(verb string, a netip.Prefix) []string {
	fam := "-4"
	if a.Addr().Is6() {
		fam = "-6"
	}
	return []string{fam, "addr", verb, a.String(), "dev", "lo"}
}

type builder struct{ rules []Rule }

func (b *builder) add(table, chain string, params ...string) {
	b.rules = append(b.rules, Rule{Table: table, Chain: chain, Params: params})
}

// insert puts a rule at 1-based position pos of chain, as `iptables -I`.
func (b *builder) insert(pos int, table, chain string, params ...string) {
	r := Rule{Table: table, Chain: chain, Params: params}
	n := 0
	for i, old := range b.rules {
		if old.Table == table && old.Chain == chain {
			n++
			if n == pos {
				b.rules = append(b.rules[:i], append([]Rule{r}, b.rules[i:]...)...)
				return
			}
		}
	}
	b.rules = append(b.rules, r)
}

func (b *builder) nat(chain string, params ...string)    { b.add("nat", chain, params...) }
func (b *builder) mangle(chain string, params ...string) { b.add("mangle", chain, params...) }
func (b *builder) filter(chain string, params ...string) { b.add("filter", chain, params...) }

// owned tags params (a rule for a built-in chain) with OwnerComment, just
// before the target.
func owned(params ...string) []string {
	out := make([]string, 0, len(params)+4)
	for i, p := range params {
		if p == "-j" {
			out = append(out, "-m", "comment", "--comment", OwnerComment)
			return append(out, params[i:]...)
		}
		out = append(out, p)
	}
	return append(out, "-m", "comment", "--comment", OwnerComment)
}

// BuildRules validates cfg and returns the IPv4 rules istio-iptables 1.14
// would write for it. It does not touch the system. Build returns the
// whole plan (IPv6, policy routing).
func BuildRules(cfg Config) (Rules, error) {
	p, err := Build(cfg)
	return p.IPv4, err
}

// Build validates cfg and returns everything applying it does. It does
// not touch the system.
func Build(cfg Config) (Plan, error) {
	p, err := cfg.parse()
	if err != nil {
		return Plan{}, err
	}
	plan := Plan{IPv4: build(p, IPv4)}
	families := []Family{IPv4}
	if p.dualStack {
		plan.IPv6 = build(p, IPv6)
		plan.LoopbackAddrs = []netip.Prefix{netip.MustParsePrefix(inboundPassthrough6)}
		families = append(families, IPv6)
	} else {
		plan.IPv6 = buildIPv6Guard(p)
		plan.IPv6Guard = true
	}
	if p.mode == ModeTProxy && p.inboundEnabled() {
		for _, f := range families {
			plan.Routes = append(plan.Routes, PolicyRoute{Family: f, Mark: p.mark, Table: p.routeTable})
		}
	}
	return plan, nil
}

func (p *parsed) inboundEnabled() bool { return p.inboundAll || len(p.inboundPorts) > 0 }

// build writes the rules of one family, in istio-iptables 1.14's order
// (IptablesConfigurator.Run).
func build(p *parsed, fam Family) Rules {
	b := &builder{}
	lo, passthrough, host := hostLoopbackCIDR, inboundPassthrough, "/32"
	if fam == IPv6 {
		lo, passthrough, host = hostLoopbackCIDR6, inboundPassthrough6, "/128"
	}
	r := p.ranges(fam)
	tproxy := p.mode == ModeTProxy

	// -c: nothing on these interfaces is captured.
	for _, ifc := range p.excludeIfaces {
		b.nat("PREROUTING", owned("-i", ifc, "-j", "RETURN")...)
		b.nat("OUTPUT", owned("-o", ifc, "-j", "RETURN")...)
	}
	if tproxy {
		for _, ifc := range p.excludeIfaces {
			b.mangle("PREROUTING", owned("-i", ifc, "-j", "RETURN")...)
			b.mangle("OUTPUT", owned("-o", ifc, "-j", "RETURN")...)
		}
	}
	// -k: traffic from VMs on these interfaces is not inbound (it is
	// treated as outbound below).
	for _, ifc := range p.kubeVirt {
		b.insert(1, "nat", "PREROUTING", owned("-i", ifc, "-j", "RETURN")...)
	}
	// Out-of-window packets are dropped instead of resetting connections.
	if p.dropInvalid {
		b.mangle("PREROUTING", owned("-m", "conntrack", "--ctstate", "INVALID", "-j", "DROP")...)
	}

	// The tunnel port (HBONE) bypasses inbound capture.
	b.nat(ChainInbound, "-p", "tcp", "--dport", p.tunnelPort, "-j", "RETURN")
	b.nat(ChainRedirect, "-p", "tcp", "-j", "REDIRECT", "--to-ports", p.proxyPort)
	b.nat(ChainInRedirect, "-p", "tcp", "-j", "REDIRECT", "--to-ports", p.capturePort)

	// Inbound: nothing is captured when -b is empty.
	if p.inboundEnabled() {
		table := "nat"
		if tproxy {
			// Established inbound connections: mark them so that policy
			// routing delivers them locally, to the proxy's socket.
			b.mangle(ChainDivert, "-j", "MARK", "--set-mark", p.mark)
			b.mangle(ChainDivert, "-j", "ACCEPT")
			// New ones: to the inbound capture port, without NAT (the TPROXY
			// target is 15006, not 15001: 003 line ~703, issue 23369).
			b.mangle(ChainTProxy, "!", "-d", lo, "-p", "tcp", "-j", "TPROXY",
				"--tproxy-mark", p.mark+"/0xffffffff", "--on-port", p.capturePort)
			table = "mangle"
		}
		b.add(table, "PREROUTING", "-p", "tcp", "-j", ChainInbound)
		if tproxy {
			// The nat rule above does not see packets in mangle.
			b.mangle(ChainInbound, "-p", "tcp", "--dport", p.tunnelPort, "-j", "RETURN")
		}
		if p.inboundAll {
			for _, port := range p.inboundExcludes {
				b.add(table, ChainInbound, "-p", "tcp", "--dport", port, "-j", "RETURN")
			}
			if tproxy {
				b.mangle(ChainInbound, "-p", "tcp", "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", ChainDivert)
				b.mangle(ChainInbound, "-p", "tcp", "-j", ChainTProxy)
			} else {
				b.nat(ChainInbound, "-p", "tcp", "-j", ChainInRedirect)
			}
		} else {
			// An explicit port list ignores -d, as istio does.
			for _, port := range p.inboundPorts {
				if tproxy {
					b.mangle(ChainInbound, "-p", "tcp", "--dport", port, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", ChainDivert)
					b.mangle(ChainInbound, "-p", "tcp", "--dport", port, "-j", ChainTProxy)
				} else {
					b.nat(ChainInbound, "-p", "tcp", "--dport", port, "-j", ChainInRedirect)
				}
			}
		}
	}

	b.nat("OUTPUT", "-p", "tcp", "-j", ChainOutput)
	// Port exclusions come before connections back to self are redirected.
	for _, port := range p.outPortsExclude {
		b.nat(ChainOutput, "-p", "tcp", "--dport", port, "-j", "RETURN")
	}
	// The inbound passthrough cluster binds 127.0.0.6: the proxy delivering
	// inbound traffic to the app must not be captured again.
	b.nat(ChainOutput, "-o", "lo", "-s", passthrough, "-j", "RETURN")
	if tproxy && p.inboundEnabled() {
		// Nor when it delivers it as the client (original_src, its socket
		// marked with -t): the rules below would send the proxy's
		// connection to the pod's own address back to 15006, a loop.
		b.nat(ChainOutput, "-o", "lo", "-m", "mark", "--mark", p.mark, "-j", "RETURN")
	}
	ownerRules := func(kind, id string) {
		// The proxy calling its own pod IP (app -> proxy -> VIP -> this
		// pod) goes through inbound capture; with DNS capture, not its
		// DNS queries.
		if p.redirectDNS {
			b.nat(ChainOutput, "-o", "lo", "!", "-d", lo, "-p", "tcp", "!", "--dport", "53",
				"-m", "owner", "--"+kind+"-owner", id, "-j", ChainInRedirect)
		} else {
			b.nat(ChainOutput, "-o", "lo", "!", "-d", lo, "-m", "owner", "--"+kind+"-owner", id, "-j", ChainInRedirect)
		}
		// The app calling itself over lo is left alone, unless loopback
		// was asked for explicitly in -i (and, with DNS capture, but its
		// TCP DNS queries to a resolver on lo).
		if !r.hasLoopback {
			if p.redirectDNS {
				b.nat(ChainOutput, "-o", "lo", "-p", "tcp", "!", "--dport", "53",
					"-m", "owner", "!", "--"+kind+"-owner", id, "-j", "RETURN")
			} else {
				b.nat(ChainOutput, "-o", "lo", "-m", "owner", "!", "--"+kind+"-owner", id, "-j", "RETURN")
			}
		}
		// The proxy's own outbound traffic is never captured (no loop).
		b.nat(ChainOutput, "-m", "owner", "--"+kind+"-owner", id, "-j", "RETURN")
	}
	for _, uid := range p.uids {
		ownerRules("uid", uid)
	}
	for _, gid := range p.gids {
		ownerRules("gid", gid)
	}
	if p.redirectDNS {
		if p.captureAllDNS {
			b.nat(ChainOutput, "-p", "tcp", "--dport", "53", "-j", "REDIRECT", "--to-ports", DNSCapturePort)
		} else {
			// Only the resolvers in resolv.conf: a local DNS proxy's
			// upstream queries must not loop back to the agent.
			for _, s := range r.dnsServers {
				b.nat(ChainOutput, "-p", "tcp", "--dport", "53", "-d", s.String()+host, "-j", "REDIRECT", "--to-ports", DNSCapturePort)
			}
		}
	}
	b.nat(ChainOutput, "-d", lo, "-j", "RETURN")
	// Exclusions must come before inclusions.
	for _, cidr := range r.exclude {
		b.nat(ChainOutput, "-d", cidr.String(), "-j", "RETURN")
	}
	for _, port := range p.outPortsInclude {
		b.nat(ChainOutput, "-p", "tcp", "--dport", port, "-j", ChainRedirect)
	}
	switch {
	case p.outboundAll:
		b.nat(ChainOutput, "-j", ChainRedirect)
		for _, ifc := range p.kubeVirt {
			b.insert(1, "nat", "PREROUTING", "-i", ifc, "-j", ChainRedirect)
		}
	case len(r.include) > 0:
		for _, cidr := range r.include {
			for _, ifc := range p.kubeVirt {
				b.insert(1, "nat", "PREROUTING", "-i", ifc, "-d", cidr.String(), "-j", ChainRedirect)
			}
			b.nat(ChainOutput, "-d", cidr.String(), "-j", ChainRedirect)
		}
		// All other traffic is not redirected.
		b.nat(ChainOutput, "-j", "RETURN")
	}

	if p.redirectDNS {
		buildDNSUDP(b, p, r, host)
	}
	if tproxy && p.inboundEnabled() {
		buildConnmark(b, p, lo, passthrough)
	}
	return Rules{rules: b.rules}
}

// buildIPv6Guard is the IPv6 rule set without --dual-stack. Nothing
// captures IPv6 then, yet every pod has an IPv6 link-local address
// (fe80::/10 on eth0): a plaintext connection to [fe80::…%if]:PORT from
// the node or a pod on the same link would reach the app directly, past
// the proxy's mTLS, authorization and JWT checks. So, as istio-iptables
// did before it stopped touching IPv6 when IPv6 is off
// (tools/istio-iptables/pkg/cmd/run.go before istio PR 19769: "Drop all
// inbound traffic except established connections", ip6tables INPUT
// ESTABLISHED/lo ACCEPT, then REJECT), IPv6 is refused in both
// directions except:
//
//   - established and related traffic (replies; ICMPv6 errors about it);
//   - loopback (::1, and the pod's own addresses, which are routed over
//     lo): health checks and the agent's listeners on ::1 keep working,
//     and the app calling itself is not the proxy's business in IPv4
//     either;
//   - the -c interfaces, where IPv4 is not captured either;
//   - ICMPv6, which cannot reach a port and carries neighbour discovery:
//     with it the refusal is an immediate ICMPv6 port unreachable
//     (ECONNREFUSED) instead of a timeout.
//
// REJECT's default answer (icmp6-port-unreachable) makes a refused
// connect fail at once with ECONNREFUSED, so that clients fall back to
// IPv4 instead of waiting.
//
// Outbound is refused too: the app's IPv6 connections would otherwise
// leave past the proxy (outbound policy, mTLS origination). The rules are
// in the filter table's built-in INPUT and OUTPUT chains, tagged with
// OwnerComment, so re-applying replaces them and cleanup removes them.
func buildIPv6Guard(p *parsed) Rules {
	b := &builder{}
	for _, c := range []struct{ chain, iface string }{{"INPUT", "-i"}, {"OUTPUT", "-o"}} {
		b.filter(c.chain, owned("-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")...)
		b.filter(c.chain, owned(c.iface, "lo", "-j", "ACCEPT")...)
		for _, ifc := range p.excludeIfaces {
			b.filter(c.chain, owned(c.iface, ifc, "-j", "ACCEPT")...)
		}
		b.filter(c.chain, owned("-p", "ipv6-icmp", "-j", "ACCEPT")...)
		if c.chain == "OUTPUT" {
			// The ICMPv6 error REJECT sends for a packet of our own to a
			// link-local address never comes back to the socket (the
			// connection would hang until it times out); a reset does.
			b.filter(c.chain, owned("-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset")...)
		}
		b.filter(c.chain, owned("-j", "REJECT")...)
	}
	return Rules{rules: b.rules}
}

// buildDNSUDP captures UDP DNS (istio's HandleDNSUDP): the proxy's own
// queries pass, the app's go to the agent, and conntrack zones keep the
// two legs of a query apart (app<->agent in zone 2, agent<->resolver in
// zone 1), which avoids UDP conntrack races.
func buildDNSUDP(b *builder, p *parsed, r *familyRanges, host string) {
	for _, uid := range p.uids {
		b.nat("OUTPUT", owned("-p", "udp", "--dport", "53", "-m", "owner", "--uid-owner", uid, "-j", "RETURN")...)
	}
	for _, gid := range p.gids {
		b.nat("OUTPUT", owned("-p", "udp", "--dport", "53", "-m", "owner", "--gid-owner", gid, "-j", "RETURN")...)
	}
	if p.captureAllDNS {
		b.nat("OUTPUT", owned("-p", "udp", "--dport", "53", "-j", "REDIRECT", "--to-port", DNSCapturePort)...)
	} else {
		for _, s := range r.dnsServers {
			b.nat("OUTPUT", owned("-p", "udp", "--dport", "53", "-d", s.String()+host, "-j", "REDIRECT", "--to-port", DNSCapturePort)...)
		}
	}
	zones := func(kind, id string) {
		b.add("raw", "OUTPUT", owned("-p", "udp", "--dport", "53", "-m", "owner", "--"+kind+"-owner", id, "-j", "CT", "--zone", "1")...)
		b.add("raw", "OUTPUT", owned("-p", "udp", "--sport", DNSCapturePort, "-m", "owner", "--"+kind+"-owner", id, "-j", "CT", "--zone", "2")...)
	}
	for _, uid := range p.uids {
		zones("uid", uid)
	}
	for _, gid := range p.gids {
		zones("gid", gid)
	}
	if p.captureAllDNS {
		b.add("raw", "OUTPUT", owned("-p", "udp", "--dport", "53", "-j", "CT", "--zone", "2")...)
		b.add("raw", "PREROUTING", owned("-p", "udp", "--sport", "53", "-j", "CT", "--zone", "1")...)
		return
	}
	for _, s := range r.dnsServers {
		b.add("raw", "OUTPUT", owned("-p", "udp", "--dport", "53", "-d", s.String()+host, "-j", "CT", "--zone", "2")...)
		// Replies come from the resolver (istio 1.14 wrote -d here).
		b.add("raw", "PREROUTING", owned("-p", "udp", "--sport", "53", "-s", s.String()+host, "-j", "CT", "--zone", "1")...)
	}
}

// buildConnmark makes the app's replies to the proxy's transparent
// (original_src) connections go back to the proxy, not out of eth0: the
// proxy marks those connections with -t (003 lines 758-835, istio PR 28363).
func buildConnmark(b *builder, p *parsed, lo, passthrough string) {
	// The proxy's packets to the app: remember the mark on the connection.
	b.mangle("PREROUTING", owned("-p", "tcp", "-m", "mark", "--mark", p.mark, "-j", "CONNMARK", "--save-mark")...)
	// Keep that mark on the proxy's own packets.
	b.mangle("OUTPUT", owned("-p", "tcp", "-o", "lo", "-m", "mark", "--mark", p.mark, "-j", "RETURN")...)
	// The proxy calling this pod's address (app -> VIP -> proxy -> this
	// pod) is inbound traffic: mark it for ISTIO_INBOUND below.
	for _, uid := range p.uids {
		b.mangle("OUTPUT", owned("!", "-d", lo, "-p", "tcp", "-o", "lo", "-m", "owner", "--uid-owner", uid,
			"-j", "MARK", "--set-mark", OutboundMark)...)
	}
	for _, gid := range p.gids {
		b.mangle("OUTPUT", owned("!", "-d", lo, "-p", "tcp", "-o", "lo", "-m", "owner", "--gid-owner", gid,
			"-j", "MARK", "--set-mark", OutboundMark)...)
	}
	// The app's replies: the connection's mark routes them (table -r) to lo.
	b.mangle("OUTPUT", owned("-p", "tcp", "-m", "connmark", "--mark", p.mark, "-j", "CONNMARK", "--restore-mark")...)
	// No self-request loop: the proxy's marked connections to the app, its
	// passthrough connections from 127.0.0.6, and the app's own calls over
	// lo are not captured again.
	b.insert(1, "mangle", ChainInbound, "-p", "tcp", "-m", "mark", "--mark", p.mark, "-j", "RETURN")
	b.insert(2, "mangle", ChainInbound, "-p", "tcp", "-s", passthrough, "-i", "lo", "-j", "RETURN")
	b.insert(3, "mangle", ChainInbound, "-p", "tcp", "-i", "lo", "-m", "mark", "!", "--mark", OutboundMark, "-j", "RETURN")
}
