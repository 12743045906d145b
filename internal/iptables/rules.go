package iptables

import (
	"errors"
	"strings"
)

// Chains created by the rules (nat table, REDIRECT mode).
const (
	ChainInbound    = "ISTIO_INBOUND"
	ChainRedirect   = "ISTIO_REDIRECT"
	ChainInRedirect = "ISTIO_IN_REDIRECT"
	ChainOutput     = "ISTIO_OUTPUT"
)

// chainPrefix marks the chains this package owns; Apply clears every chain
// with this prefix and every jump into one before adding the rules again.
const chainPrefix = "ISTIO_"

var builtinChains = map[string]bool{
	"PREROUTING": true, "INPUT": true, "FORWARD": true, "OUTPUT": true, "POSTROUTING": true,
}

// ErrTProxyNotImplemented is returned by BuildRules for -m TPROXY.
var ErrTProxyNotImplemented = errors.New("-m/--istio-inbound-interception-mode TPROXY is not implemented yet; use REDIRECT")

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

// Rules is an ordered rule set, in the order istio-iptables 1.14 appends
// them. It is immutable once built.
type Rules struct {
	rules []Rule
}

// List returns a copy of the rules in order.
func (rs Rules) List() []Rule { return append([]Rule(nil), rs.rules...) }

// Tables returns the tables the rules touch, in iptables-restore order.
func (rs Rules) Tables() []string {
	var out []string
	for _, t := range []string{"mangle", "nat", "raw"} {
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
// then the rules, then COMMIT. This is the --dry-run output; for the seed's
// arguments the nat block is line for line the one in the seed. Feed it to
// `iptables-restore --noflush` only on a table without ISTIO_* chains; Apply
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

type builder struct{ rules []Rule }

func (b *builder) add(table, chain string, params ...string) {
	b.rules = append(b.rules, Rule{Table: table, Chain: chain, Params: params})
}

func (b *builder) nat(chain string, params ...string) { b.add("nat", chain, params...) }

// BuildRules validates cfg and returns the rules istio-iptables 1.14 would
// write for it (IPv4, nat table, REDIRECT mode). It does not touch the system.
func BuildRules(cfg Config) (Rules, error) {
	p, err := cfg.parse()
	if err != nil {
		return Rules{}, err
	}
	if p.mode == ModeTProxy {
		return Rules{}, ErrTProxyNotImplemented
	}
	b := &builder{}

	// The tunnel port (HBONE) bypasses inbound capture.
	b.nat(ChainInbound, "-p", "tcp", "--dport", p.tunnelPort, "-j", "RETURN")
	b.nat(ChainRedirect, "-p", "tcp", "-j", "REDIRECT", "--to-ports", p.proxyPort)
	b.nat(ChainInRedirect, "-p", "tcp", "-j", "REDIRECT", "--to-ports", p.capturePort)

	// Inbound: nothing is captured when -b is empty.
	if p.inboundAll || len(p.inboundPorts) > 0 {
		b.nat("PREROUTING", "-p", "tcp", "-j", ChainInbound)
		if p.inboundAll {
			for _, port := range p.inboundExcludes {
				b.nat(ChainInbound, "-p", "tcp", "--dport", port, "-j", "RETURN")
			}
			b.nat(ChainInbound, "-p", "tcp", "-j", ChainInRedirect)
		} else {
			// An explicit port list ignores -d, as istio does.
			for _, port := range p.inboundPorts {
				b.nat(ChainInbound, "-p", "tcp", "--dport", port, "-j", ChainInRedirect)
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
	b.nat(ChainOutput, "-o", "lo", "-s", inboundPassthrough, "-j", "RETURN")
	ownerRules := func(kind string, id string) {
		// The proxy calling its own pod IP (app -> proxy -> VIP -> this
		// pod) goes through inbound capture.
		b.nat(ChainOutput, "-o", "lo", "!", "-d", hostLoopbackCIDR, "-m", "owner", "--"+kind+"-owner", id, "-j", ChainInRedirect)
		// The app calling itself over lo is left alone, unless loopback
		// was asked for explicitly in -i.
		if !p.outboundHasLoopback {
			b.nat(ChainOutput, "-o", "lo", "-m", "owner", "!", "--"+kind+"-owner", id, "-j", "RETURN")
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
	b.nat(ChainOutput, "-d", hostLoopbackCIDR, "-j", "RETURN")
	// Exclusions must come before inclusions.
	for _, cidr := range p.outboundExcludes {
		b.nat(ChainOutput, "-d", cidr.String(), "-j", "RETURN")
	}
	for _, port := range p.outPortsInclude {
		b.nat(ChainOutput, "-p", "tcp", "--dport", port, "-j", ChainRedirect)
	}
	switch {
	case p.outboundAll:
		b.nat(ChainOutput, "-j", ChainRedirect)
	case len(p.outboundCIDRs) > 0:
		for _, cidr := range p.outboundCIDRs {
			b.nat(ChainOutput, "-d", cidr.String(), "-j", ChainRedirect)
		}
		// All other traffic is not redirected.
		b.nat(ChainOutput, "-j", "RETURN")
	}
	return Rules{rules: b.rules}, nil
}
