package mesh

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig"
)

// GatewayServer is one server of a Gateway that a gateway workload runs.
type GatewayServer struct {
	Gateway *istioconfig.Config
	// Index is the server's index in the Gateway's spec.servers.
	Index int
	// Server is the server with its hosts written as Istio's
	// sanitizeServerHostNamespace writes them: "./h" as "GWNS/h", "*/h"
	// as "h".
	Server *networking.Server
	// Protocol is the server's protocol, upper case.
	Protocol string
}

// Name is the Gateway's NAMESPACE/NAME, as VirtualServices bind to it.
func (s GatewayServer) Name() string { return s.Gateway.Namespace + "/" + s.Gateway.Name }

// TLS reports whether the server's protocol carries TLS (HTTPS, TLS).
func (s GatewayServer) TLS() bool { return istioconfig.GatewayProtocolIsTLS(s.Protocol) }

// GatewayConflict is a server left out because an earlier Gateway's
// server holds its port with a protocol it cannot share the port with.
type GatewayConflict struct {
	Port          uint32
	Kept, Dropped GatewayServer
}

func (c GatewayConflict) String() string {
	return fmt.Sprintf("port %d: %s of Gateway %s conflicts with %s of Gateway %s, which holds the port; the server of %s is left out",
		c.Port, c.Dropped.Protocol, c.Dropped.Name(), c.Kept.Protocol, c.Kept.Name(), c.Dropped.Name())
}

// GatewayServers are the servers of the Gateways that select a gateway
// workload with labels (a Gateway without a selector selects every
// gateway, as in Istio), by port (ports sorted), the servers of a port in
// Gateway order: oldest first, then by namespace/name. As Istio's
// MergeGateways, a port carries either TLS servers (told apart by SNI)
// or plaintext HTTP servers (sharing one route configuration) or one TCP
// server; a server that breaks this is left out and returned as a
// conflict, and the rest keep working.
func (s *Snapshot) GatewayServers(labels map[string]string) ([]uint32, map[uint32][]GatewayServer, []GatewayConflict) {
	gws := slices.Clone(s.Configs.List(istioconfig.KindGateway))
	slices.SortStableFunc(gws, func(a, b *istioconfig.Config) int { return a.CreationTime.Compare(b.CreationTime) })
	byPort := map[uint32][]GatewayServer{}
	var conflicts []GatewayConflict
	for _, gw := range gws {
		spec := gw.Gateway()
		if len(spec.GetSelector()) > 0 && !labelsMatch(spec.GetSelector(), labels) {
			continue
		}
		for i, srv := range spec.GetServers() {
			gs := GatewayServer{Gateway: gw, Index: i, Server: sanitizeServerHosts(srv, gw.Namespace), Protocol: strings.ToUpper(srv.GetPort().GetProtocol())}
			port := srv.GetPort().GetNumber()
			if held := byPort[port]; len(held) > 0 {
				first := held[0]
				bothHTTP := istioconfig.GatewayProtocolIsHTTP(first.Protocol) && istioconfig.GatewayProtocolIsHTTP(gs.Protocol)
				if first.TLS() != gs.TLS() || (!gs.TLS() && !bothHTTP) {
					conflicts = append(conflicts, GatewayConflict{Port: port, Kept: first, Dropped: gs})
					continue
				}
			}
			byPort[port] = append(byPort[port], gs)
		}
	}
	ports := make([]uint32, 0, len(byPort))
	for p := range byPort {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	return ports, byPort, conflicts
}

// sanitizeServerHosts is Istio's sanitizeServerHostNamespace.
func sanitizeServerHosts(srv *networking.Server, gwNS string) *networking.Server {
	out := proto.Clone(srv).(*networking.Server)
	for i, h := range out.Hosts {
		ns, host, ok := strings.Cut(h, "/")
		switch {
		case !ok:
		case ns == ".":
			out.Hosts[i] = gwNS + "/" + host
		case ns == "*":
			out.Hosts[i] = host
		}
	}
	return out
}

// gatewayProblems reports, once each, the servers the Gateways that
// select some WorkloadEntry leave out because an earlier Gateway holds
// their port (GatewayServers), on the dropped server's port.
func (s *Snapshot) gatewayProblems(workloads []*Workload) []error {
	if len(s.Configs.List(istioconfig.KindGateway)) == 0 {
		return nil
	}
	seen := map[string]bool{}
	var out []error
	for _, w := range workloads {
		_, _, conflicts := s.GatewayServers(w.Labels)
		for _, c := range conflicts {
			msg := c.String()
			if seen[msg] {
				continue
			}
			seen[msg] = true
			src := c.Dropped.Gateway.Source
			out = append(out, &istioconfig.FieldError{File: src.File, Document: src.Document,
				Field: fmt.Sprintf("spec.servers[%d].port", c.Dropped.Index), Problem: msg})
		}
	}
	return out
}
