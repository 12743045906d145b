// Package iptables builds and applies the rules that capture a workload's
// traffic into the sidecar proxy, mirroring istio-iptables 1.14
// (`pilot-agent istio-iptables`): inbound TCP is redirected (REDIRECT) or
// transparently proxied (TPROXY) to the inbound capture port (15006),
// outbound TCP is redirected to the proxy port (15001), DNS optionally to
// the agent (15053), and the proxy's own traffic (by UID/GID) is left alone.
//
// The rule builder is pure (Config -> Plan -> iptables-restore text) and is
// golden-tested without root; side effects go through Runner (iptables-save
// and iptables-restore, one per address family) and Router (`ip`).
package iptables

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Interception modes accepted by -m/--istio-inbound-interception-mode.
const (
	ModeRedirect = "REDIRECT"
	ModeTProxy   = "TPROXY"
)

// DNSCapturePort is where --redirect-dns sends port-53 traffic (the agent's
// DNS proxy), as istio's IstioAgentDNSListenerPort.
const DNSCapturePort = "15053"

// OutboundMark marks, in TPROXY mode, the proxy's own connections to the
// pod's address over lo (app -> VIP -> proxy -> this pod), so that
// ISTIO_INBOUND captures them while leaving the app's calls to itself alone
// (istio's outboundMark).
const OutboundMark = "1338"

// Config holds the istio-iptables flag values, as the user wrote them (so
// that the "Istio iptables variables" log block shows them verbatim).
// Lists are comma separated. Validate parses them.
type Config struct {
	ProxyPort               string // -p/--envoy-port
	InboundCapturePort      string // -z/--inbound-capture-port
	InboundTunnelPort       string // -e/--inbound-tunnel-port
	ProxyUID                string // -u/--proxy-uid, comma list of UIDs
	ProxyGID                string // -g/--proxy-gid, comma list of GIDs; empty means ProxyUID
	InboundInterceptionMode string // -m/--istio-inbound-interception-mode
	InboundTProxyMark       string // -t/--inbound-tproxy-mark
	InboundTProxyRouteTable string // -r/--inbound-tproxy-route-table
	InboundPortsInclude     string // -b/--istio-inbound-ports, "*" = all
	InboundPortsExclude     string // -d/--istio-local-exclude-ports
	OutboundIPRangesInclude string // -i/--istio-service-cidr, "*" = all, "" = none
	OutboundIPRangesExclude string // -x/--istio-service-exclude-cidr
	OutboundPortsInclude    string // -q/--istio-outbound-ports
	OutboundPortsExclude    string // -o/--istio-local-outbound-ports-exclude
	KubeVirtInterfaces      string // -k/--kube-virt-interfaces
	ExcludeInterfaces       string // -c/--istio-exclude-interfaces

	RedirectDNS   bool // --redirect-dns
	CaptureAllDNS bool // --capture-all-dns: all port-53 traffic, not only to DNSServers
	DropInvalid   bool // --drop-invalid
	DualStack     bool // --dual-stack: IPv6 rules too (ENABLE_INBOUND_IPV6)

	// DNSServers are the resolvers whose port-53 traffic --redirect-dns
	// captures (nameserver lines of /etc/resolv.conf), IPv4 and IPv6.
	DNSServers []string
}

// DefaultConfig returns istio-iptables' defaults (no environment applied).
func DefaultConfig() Config {
	return Config{
		ProxyPort:               "15001",
		InboundCapturePort:      "15006",
		InboundTunnelPort:       "15008",
		ProxyUID:                "1337",
		InboundInterceptionMode: ModeRedirect,
		InboundTProxyMark:       "1337",
		InboundTProxyRouteTable: "133",
	}
}

// FlagError is a Config value that does not parse. Its message names the
// flag, the value and what is wrong, e.g.
// `-b/--istio-inbound-ports: "80,x" : "x" is not a port number`.
type FlagError struct {
	Flag   string // e.g. "-b/--istio-inbound-ports"
	Value  string
	Reason string
}

func (e *FlagError) Error() string {
	return fmt.Sprintf("%s: %q : %s", e.Flag, e.Value, e.Reason)
}

// Flag names as shown in errors.
const (
	flagProxyPort      = "-p/--envoy-port"
	flagCapturePort    = "-z/--inbound-capture-port"
	flagTunnelPort     = "-e/--inbound-tunnel-port"
	flagUID            = "-u/--proxy-uid"
	flagGID            = "-g/--proxy-gid"
	flagMode           = "-m/--istio-inbound-interception-mode"
	flagTProxyMark     = "-t/--inbound-tproxy-mark"
	flagRouteTable     = "-r/--inbound-tproxy-route-table"
	flagInPorts        = "-b/--istio-inbound-ports"
	flagInExclude      = "-d/--istio-local-exclude-ports"
	flagOutCIDRs       = "-i/--istio-service-cidr"
	flagOutExclCIDRs   = "-x/--istio-service-exclude-cidr"
	flagOutPorts       = "-q/--istio-outbound-ports"
	flagOutExclPorts   = "-o/--istio-local-outbound-ports-exclude"
	flagKubeVirt       = "-k/--kube-virt-interfaces"
	flagExcludeIfaces  = "-c/--istio-exclude-interfaces"
	flagDNSServers     = "nameserver (/etc/resolv.conf)"
	wildcard           = "*"
	hostLoopbackCIDR   = "127.0.0.1/32"
	hostLoopbackCIDR6  = "::1/128"
	inboundPassthrough = "127.0.0.6/32" // InboundPassthroughClusterIpv4
	// InboundPassthrough6 is the IPv6 source the proxy binds for inbound
	// passthrough (istio's ::6); with --dual-stack it is added to lo.
	inboundPassthrough6 = "::6/128"
)

// familyRanges is the part of -i/-x that applies to one address family.
type familyRanges struct {
	include     []netip.Prefix
	hasLoopback bool
	exclude     []netip.Prefix
	dnsServers  []netip.Addr
}

// parsed is a validated Config in the shape the builder needs.
type parsed struct {
	proxyPort, capturePort, tunnelPort string
	uids, gids                         []string
	mode                               string
	mark, routeTable                   string

	inboundAll      bool     // -b '*'
	inboundPorts    []string // -b list (when not '*')
	inboundExcludes []string // -d

	outboundAll     bool // -i '*'
	v4, v6          familyRanges
	outPortsInclude []string
	outPortsExclude []string

	kubeVirt, excludeIfaces []string

	redirectDNS, captureAllDNS, dropInvalid, dualStack bool
}

func (p *parsed) ranges(f Family) *familyRanges {
	if f == IPv6 {
		return &p.v6
	}
	return &p.v4
}

// Validate reports the first value that does not parse, as a *FlagError.
// It changes nothing on the system.
func (c Config) Validate() error {
	_, err := c.parse()
	return err
}

// proxyGID is -g, or -u when -g is empty (as istio-iptables).
func (c Config) proxyGID() string {
	if strings.TrimSpace(c.ProxyGID) == "" {
		return c.ProxyUID
	}
	return c.ProxyGID
}

func (c Config) parse() (*parsed, error) {
	p := &parsed{
		redirectDNS:   c.RedirectDNS,
		captureAllDNS: c.CaptureAllDNS,
		dropInvalid:   c.DropInvalid,
		dualStack:     c.DualStack,
	}
	var err error
	if p.proxyPort, err = onePort(flagProxyPort, c.ProxyPort); err != nil {
		return nil, err
	}
	if p.capturePort, err = onePort(flagCapturePort, c.InboundCapturePort); err != nil {
		return nil, err
	}
	if p.tunnelPort, err = onePort(flagTunnelPort, c.InboundTunnelPort); err != nil {
		return nil, err
	}
	if p.uids, err = ids(flagUID, c.ProxyUID); err != nil {
		return nil, err
	}
	if len(p.uids) == 0 {
		return nil, &FlagError{Flag: flagUID, Value: c.ProxyUID, Reason: "a proxy UID is required (e.g. 1337)"}
	}
	if p.gids, err = ids(flagGID, c.proxyGID()); err != nil {
		return nil, err
	}
	switch mode := strings.TrimSpace(c.InboundInterceptionMode); mode {
	case ModeRedirect, ModeTProxy:
		p.mode = mode
	default:
		return nil, &FlagError{Flag: flagMode, Value: c.InboundInterceptionMode,
			Reason: "is not an interception mode (REDIRECT or TPROXY)"}
	}
	mark, err := number(flagTProxyMark, c.InboundTProxyMark, 1<<32-1)
	if err != nil {
		return nil, err
	}
	if mark == 0 {
		return nil, &FlagError{Flag: flagTProxyMark, Value: c.InboundTProxyMark, Reason: "a packet mark must not be 0"}
	}
	if p.mode == ModeTProxy && strconv.FormatUint(mark, 10) == OutboundMark {
		return nil, &FlagError{Flag: flagTProxyMark, Value: c.InboundTProxyMark,
			Reason: "collides with the proxy's outbound mark " + OutboundMark}
	}
	p.mark = strconv.FormatUint(mark, 10)
	table, err := number(flagRouteTable, c.InboundTProxyRouteTable, 1<<32-1)
	if err != nil {
		return nil, err
	}
	if table == 0 || table >= 253 && table <= 255 {
		return nil, &FlagError{Flag: flagRouteTable, Value: c.InboundTProxyRouteTable,
			Reason: "is a reserved routing table (0, 253 default, 254 main, 255 local); use e.g. 133"}
	}
	p.routeTable = strconv.FormatUint(table, 10)

	if strings.TrimSpace(c.InboundPortsInclude) == wildcard {
		p.inboundAll = true
	} else if p.inboundPorts, err = ports(flagInPorts, c.InboundPortsInclude); err != nil {
		return nil, err
	}
	if p.inboundExcludes, err = ports(flagInExclude, c.InboundPortsExclude); err != nil {
		return nil, err
	}
	if p.outPortsInclude, err = ports(flagOutPorts, c.OutboundPortsInclude); err != nil {
		return nil, err
	}
	if p.outPortsExclude, err = ports(flagOutExclPorts, c.OutboundPortsExclude); err != nil {
		return nil, err
	}

	if strings.TrimSpace(c.OutboundIPRangesInclude) == wildcard {
		p.outboundAll = true
	} else {
		include, err := cidrs(flagOutCIDRs, c.OutboundIPRangesInclude)
		if err != nil {
			return nil, err
		}
		for _, pfx := range include {
			r := p.ranges(familyOf(pfx.Addr()))
			r.include = append(r.include, pfx)
			if pfx.Addr().IsLoopback() {
				// istio checks both families: loopback in either keeps
				// the app's calls to itself captured in both.
				p.v4.hasLoopback, p.v6.hasLoopback = true, true
			}
		}
	}
	if strings.TrimSpace(c.OutboundIPRangesExclude) == wildcard {
		return nil, &FlagError{Flag: flagOutExclCIDRs, Value: c.OutboundIPRangesExclude,
			Reason: `"*" is not allowed here; list the CIDRs to exclude`}
	}
	exclude, err := cidrs(flagOutExclCIDRs, c.OutboundIPRangesExclude)
	if err != nil {
		return nil, err
	}
	for _, pfx := range exclude {
		r := p.ranges(familyOf(pfx.Addr()))
		r.exclude = append(r.exclude, pfx)
	}
	if p.kubeVirt, err = interfaces(flagKubeVirt, c.KubeVirtInterfaces); err != nil {
		return nil, err
	}
	if p.excludeIfaces, err = interfaces(flagExcludeIfaces, c.ExcludeInterfaces); err != nil {
		return nil, err
	}
	for _, s := range c.DNSServers {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil || a.Zone() != "" {
			return nil, &FlagError{Flag: flagDNSServers, Value: s, Reason: "is not an IP address"}
		}
		a = a.Unmap()
		r := p.ranges(familyOf(a))
		r.dnsServers = append(r.dnsServers, a)
	}
	return p, nil
}

func familyOf(a netip.Addr) Family {
	if a.Unmap().Is4() {
		return IPv4
	}
	return IPv6
}

// split mirrors istio's config.Split: comma separated, blanks dropped.
func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func number(flag, value string, max uint64) (uint64, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(value), 10, 64)
	if err != nil || n > max {
		return 0, &FlagError{Flag: flag, Value: value, Reason: "is not a number"}
	}
	return n, nil
}

func onePort(flag, value string) (string, error) {
	v := strings.TrimSpace(value)
	if !isPort(v) {
		return "", &FlagError{Flag: flag, Value: value, Reason: "is not a port number (1-65535)"}
	}
	return v, nil
}

func isPort(s string) bool {
	n, err := strconv.ParseUint(s, 10, 16)
	return err == nil && n > 0 && strconv.FormatUint(n, 10) == s
}

func ports(flag, value string) ([]string, error) {
	list := split(value)
	for _, p := range list {
		if !isPort(p) {
			return nil, &FlagError{Flag: flag, Value: value, Reason: fmt.Sprintf("%q is not a port number", p)}
		}
	}
	return list, nil
}

func ids(flag, value string) ([]string, error) {
	list := split(value)
	for _, id := range list {
		if n, err := strconv.ParseUint(id, 10, 32); err != nil || strconv.FormatUint(n, 10) != id {
			return nil, &FlagError{Flag: flag, Value: value, Reason: fmt.Sprintf("%q is not a numeric ID", id)}
		}
	}
	return list, nil
}

// interfaces accepts Linux interface names (1-15 bytes, no blanks, '/'
// or ':'); iptables' trailing '+' wildcard is allowed.
func interfaces(flag, value string) ([]string, error) {
	list := split(value)
	for _, name := range list {
		if len(name) > 15 || strings.ContainsAny(name, " \t/:!\"'") {
			return nil, &FlagError{Flag: flag, Value: value,
				Reason: fmt.Sprintf("%q is not a network interface name (at most 15 characters, e.g. eth1)", name)}
		}
	}
	return list, nil
}

func cidrs(flag, value string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range split(value) {
		pfx, err := netip.ParsePrefix(s)
		if err != nil || pfx.Addr().Zone() != "" {
			return nil, &FlagError{Flag: flag, Value: value,
				Reason: fmt.Sprintf("%q is not a CIDR (e.g. 10.96.0.0/12)", s)}
		}
		if pfx.Addr().Is4In6() {
			return nil, &FlagError{Flag: flag, Value: value,
				Reason: fmt.Sprintf("%q is an IPv4-mapped IPv6 CIDR; write the IPv4 form", s)}
		}
		// istio-iptables prints net.IPNet.String(): the masked network.
		out = append(out, pfx.Masked())
	}
	return out, nil
}
