package iptables

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// environmentVars are the variables istio-iptables dumps under "Istio
// iptables environment:", in its order.
var environmentVars = []string{
	"ENVOY_PORT",
	"INBOUND_CAPTURE_PORT",
	"ISTIO_INBOUND_INTERCEPTION_MODE",
	"ISTIO_INBOUND_TPROXY_ROUTE_TABLE",
	"ISTIO_INBOUND_PORTS",
	"ISTIO_OUTBOUND_PORTS",
	"ISTIO_LOCAL_EXCLUDE_PORTS",
	"ISTIO_EXCLUDE_INTERFACES",
	"ISTIO_SERVICE_CIDR",
	"ISTIO_SERVICE_EXCLUDE_CIDR",
	"ISTIO_META_DNS_CAPTURE",
	"INVALID_DROP",
}

// EnvironmentBlock is the body of istio-iptables' "Istio iptables
// environment:" log entry: one NAME=value line per variable, values as
// getenv returns them (empty when unset).
func EnvironmentBlock(getenv func(string) string) string {
	var b strings.Builder
	for _, name := range environmentVars {
		fmt.Fprintf(&b, "%s=%s\n", name, getenv(name))
	}
	return b.String()
}

// VariablesBlock is the body of istio-iptables' "Istio iptables variables:"
// log entry. Features Strait does not have (owner-group filters, output
// path, CNI mode) show their defaults.
func (c Config) VariablesBlock() string {
	var v4, v6 []string
	for _, s := range c.DNSServers {
		if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil && a.Unmap().Is4() {
			v4 = append(v4, s)
		} else {
			v6 = append(v6, s)
		}
	}
	vars := []struct{ name, value string }{
		{"PROXY_PORT", c.ProxyPort},
		{"PROXY_INBOUND_CAPTURE_PORT", c.InboundCapturePort},
		{"PROXY_TUNNEL_PORT", c.InboundTunnelPort},
		{"PROXY_UID", c.ProxyUID},
		{"PROXY_GID", c.proxyGID()},
		{"INBOUND_INTERCEPTION_MODE", c.InboundInterceptionMode},
		{"INBOUND_TPROXY_MARK", c.InboundTProxyMark},
		{"INBOUND_TPROXY_ROUTE_TABLE", c.InboundTProxyRouteTable},
		{"INBOUND_PORTS_INCLUDE", c.InboundPortsInclude},
		{"INBOUND_PORTS_EXCLUDE", c.InboundPortsExclude},
		{"OUTBOUND_OWNER_GROUPS_INCLUDE", "*"},
		{"OUTBOUND_OWNER_GROUPS_EXCLUDE", ""},
		{"OUTBOUND_IP_RANGES_INCLUDE", c.OutboundIPRangesInclude},
		{"OUTBOUND_IP_RANGES_EXCLUDE", c.OutboundIPRangesExclude},
		{"OUTBOUND_PORTS_INCLUDE", c.OutboundPortsInclude},
		{"OUTBOUND_PORTS_EXCLUDE", c.OutboundPortsExclude},
		{"KUBE_VIRT_INTERFACES", c.KubeVirtInterfaces},
		{"ENABLE_INBOUND_IPV6", strconv.FormatBool(c.DualStack)},
		{"DNS_CAPTURE", strconv.FormatBool(c.RedirectDNS)},
		{"DROP_INVALID", strconv.FormatBool(c.DropInvalid)},
		{"CAPTURE_ALL_DNS", strconv.FormatBool(c.CaptureAllDNS)},
		// istio prints the two []string with %v: "[a b],[c]".
		{"DNS_SERVERS", fmt.Sprintf("%v,%v", list(v4), list(v6))},
		{"OUTPUT_PATH", ""},
		{"NETWORK_NAMESPACE", ""},
		{"CNI_MODE", "false"},
		{"EXCLUDE_INTERFACES", c.ExcludeInterfaces},
	}
	var b strings.Builder
	for _, v := range vars {
		fmt.Fprintf(&b, "%s=%s\n", v.name, v.value)
	}
	return b.String()
}

func list(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
