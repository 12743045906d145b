// Package iptables builds and applies the rules that capture a workload's
// TCP traffic into the sidecar proxy, mirroring istio-iptables 1.14
// (`pilot-agent istio-iptables`): inbound traffic is redirected to the
// inbound capture port (15006), outbound traffic to the proxy port (15001),
// and the proxy's own traffic (by UID/GID) is left alone.
//
// The rule builder is pure (Config -> Rules -> iptables-restore text) and is
// golden-tested without root; side effects go through Runner.
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
	wildcard           = "*"
	hostLoopbackCIDR   = "127.0.0.1/32"
	inboundPassthrough = "127.0.0.6/32" // InboundPassthroughClusterIpv4
)

// parsed is a validated Config in the shape the builder needs.
type parsed struct {
	proxyPort, capturePort, tunnelPort string
	uids, gids                         []string
	mode                               string

	inboundAll      bool     // -b '*'
	inboundPorts    []string // -b list (when not '*')
	inboundExcludes []string // -d

	outboundAll         bool // -i '*'
	outboundCIDRs       []netip.Prefix
	outboundHasLoopback bool
	outboundExcludes    []netip.Prefix
	outPortsInclude     []string
	outPortsExclude     []string
}

// Validate reports the first value that does not parse, as a *FlagError.
// It changes nothing on the system.
func (c Config) Validate() error {
	_, err := c.parse()
	return err
}

func (c Config) parse() (*parsed, error) {
	p := &parsed{}
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
	gid := c.ProxyGID
	if strings.TrimSpace(gid) == "" {
		gid = c.ProxyUID
	}
	if p.gids, err = ids(flagGID, gid); err != nil {
		return nil, err
	}
	switch mode := strings.TrimSpace(c.InboundInterceptionMode); mode {
	case ModeRedirect, ModeTProxy:
		p.mode = mode
	default:
		return nil, &FlagError{Flag: flagMode, Value: c.InboundInterceptionMode,
			Reason: "is not an interception mode (REDIRECT or TPROXY)"}
	}
	if _, err = number(flagTProxyMark, c.InboundTProxyMark, 1<<32-1); err != nil {
		return nil, err
	}
	if _, err = number(flagRouteTable, c.InboundTProxyRouteTable, 1<<32-1); err != nil {
		return nil, err
	}

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
	} else if p.outboundCIDRs, err = cidrs(flagOutCIDRs, c.OutboundIPRangesInclude); err != nil {
		return nil, err
	}
	for _, pfx := range p.outboundCIDRs {
		if pfx.Addr().IsLoopback() {
			p.outboundHasLoopback = true
		}
	}
	if strings.TrimSpace(c.OutboundIPRangesExclude) == wildcard {
		return nil, &FlagError{Flag: flagOutExclCIDRs, Value: c.OutboundIPRangesExclude,
			Reason: `"*" is not allowed here; list the CIDRs to exclude`}
	}
	if p.outboundExcludes, err = cidrs(flagOutExclCIDRs, c.OutboundIPRangesExclude); err != nil {
		return nil, err
	}
	return p, nil
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

func cidrs(flag, value string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range split(value) {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, &FlagError{Flag: flag, Value: value,
				Reason: fmt.Sprintf("%q is not a CIDR (e.g. 10.96.0.0/12)", s)}
		}
		if !pfx.Addr().Is4() {
			return nil, &FlagError{Flag: flag, Value: value,
				Reason: fmt.Sprintf("%q is IPv6; only IPv4 is supported yet", s)}
		}
		// istio-iptables prints net.IPNet.String(): the masked network.
		out = append(out, pfx.Masked())
	}
	return out, nil
}
