package gen

import (
	"fmt"
	"strconv"
	"strings"
)

// Well-known cluster and listener names (Istio's, which tools and dashboards expect).
const (
	PassthroughCluster        = "PassthroughCluster"
	InboundPassthroughCluster = "InboundPassthroughCluster"
	BlackHoleCluster          = "BlackHoleCluster"

	VirtualOutboundListener = "virtualOutbound"
	VirtualInboundListener  = "virtualInbound"

	OutboundCapturePort = 15001
	InboundCapturePort  = 15006

	// InboundPassthroughBindAddress is the source address of connections the
	// proxy makes to its own workload, which iptables lets through.
	InboundPassthroughBindAddress = "127.0.0.6"
)

// OutboundClusterName returns "outbound|PORT|SUBSET|HOST".
func OutboundClusterName(port uint32, subset, host string) string {
	return fmt.Sprintf("outbound|%d|%s|%s", port, subset, host)
}

// InboundClusterName returns "inbound|PORT||".
func InboundClusterName(port uint32) string {
	return fmt.Sprintf("inbound|%d||", port)
}

// ParseOutboundClusterName splits "outbound|PORT|SUBSET|HOST". It does not
// allocate: every EDS push parses each cluster name a proxy watches.
func ParseOutboundClusterName(name string) (port uint32, subset, host string, ok bool) {
	rest, ok := strings.CutPrefix(name, "outbound|")
	if !ok {
		return 0, "", "", false
	}
	portStr, rest, ok1 := strings.Cut(rest, "|")
	subset, host, ok2 := strings.Cut(rest, "|")
	if !ok1 || !ok2 || host == "" || strings.Contains(host, "|") {
		return 0, "", "", false
	}
	n, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || n == 0 {
		return 0, "", "", false
	}
	return uint32(n), subset, host, true
}

// RouteName is the RDS name of the outbound HTTP routes of a port.
func RouteName(port uint32) string { return strconv.FormatUint(uint64(port), 10) }
