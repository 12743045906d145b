package iptables

import (
	"fmt"
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
// log entry. Features Strait does not implement (DNS capture, kubevirt,
// CNI, IPv6) show their disabled defaults.
func (c Config) VariablesBlock() string {
	gid := c.ProxyGID
	if strings.TrimSpace(gid) == "" {
		gid = c.ProxyUID
	}
	vars := []struct{ name, value string }{
		{"PROXY_PORT", c.ProxyPort},
		{"PROXY_INBOUND_CAPTURE_PORT", c.InboundCapturePort},
		{"PROXY_TUNNEL_PORT", c.InboundTunnelPort},
		{"PROXY_UID", c.ProxyUID},
		{"PROXY_GID", gid},
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
		{"KUBE_VIRT_INTERFACES", ""},
		{"ENABLE_INBOUND_IPV6", "false"},
		{"DNS_CAPTURE", "false"},
		{"DROP_INVALID", "false"},
		{"CAPTURE_ALL_DNS", "false"},
		{"DNS_SERVERS", "[],[]"},
		{"OUTPUT_PATH", ""},
		{"NETWORK_NAMESPACE", ""},
		{"CNI_MODE", "false"},
		{"EXCLUDE_INTERFACES", ""},
	}
	var b strings.Builder
	for _, v := range vars {
		fmt.Fprintf(&b, "%s=%s\n", v.name, v.value)
	}
	return b.String()
}
