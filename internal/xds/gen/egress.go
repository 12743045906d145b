package gen

// The Sidecar's egress listeners that name a port, as Istio builds them
// (pilot/pkg/networking/core/listener.go: buildSidecarOutboundListeners;
// httproute.go: BuildSidecarOutboundVirtualHosts with
// SidecarScope.GetEgressListenerForRDS). Such a listener claims its port:
// an HTTP one is the port's listener (0.0.0.0_PORT, or BIND_PORT) and its
// route configuration lists only the listener's services that have the
// port; a TCP one gets a listener per service address (or one on its
// bind) whose default destination is the service's port of that number,
// or its only port. With captureMode NONE the proxy binds the listener
// itself, on bind or 127.0.0.1, and the application calls it there.

import (
	"net/netip"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/straitmesh/strait/internal/mesh"
)

// captureNoneBind is where a captureMode NONE listener without bind
// listens, as Istio's default for such listeners (the proxy's localhost).
const captureNoneBind = "127.0.0.1"

// egressPortListeners adds, through add (false: the name was taken), the
// listeners of scope's egress listeners with a port, and returns byLabels
// with those whose tcp routes match on sourceLabels.
func egressPortListeners(snap *mesh.Snapshot, scope *mesh.Scope, labels map[string]string, labelsKnown bool,
	add func(*listener.Listener) bool, byLabels []labelListener) []labelListener {
	for _, el := range scope.Listeners {
		port := el.Port // not UDP nor a port of the proxy's own: refused on load
		addr := el.Bind
		if addr == "" && el.CaptureNone {
			addr = captureNoneBind
		}
		if port.Protocol.IsHTTP() {
			if addr == "" {
				addr = "0.0.0.0"
			}
			add(httpListenerOn(addr, port.Number, el.CaptureNone, meshPathNormalization(snap.Mesh)))
			continue
		}
		for _, svc := range el.Services {
			addrs := []string{addr}
			if addr == "" {
				addrs = listenAddresses(svc)
			}
			for _, a := range addrs {
				src := &l4Source{ns: scope.Namespace, labels: labels, labelsKnown: labelsKnown}
				ll := labelListener{svc: svc, port: port, addr: a, bind: el.CaptureNone}
				if add(ll.build(snap, src)) && src.usedLabels {
					byLabels = append(byLabels, ll)
				}
			}
		}
	}
	return byLabels
}

// listenAddresses are the addresses a captured TCP egress listener of svc
// listens on: its IP addresses, else 0.0.0.0 for a service without any
// (a CIDR has no single address to hand off to).
func listenAddresses(svc *mesh.Service) []string {
	var out []string
	for _, a := range svc.Addresses {
		if _, err := netip.ParseAddr(a); err == nil {
			out = append(out, a)
		}
	}
	if len(out) == 0 && len(svc.Addresses) == 0 {
		out = append(out, "0.0.0.0")
	}
	return out
}

// httpPortServices are, per HTTP route configuration (by port), the
// services whose virtual hosts it lists: on a port an egress listener
// claims, that listener's services that have the port; on the other
// ports, the catch-all listener's services with an HTTP port of that
// number. The ports come back sorted.
func httpPortServices(scope *mesh.Scope) (map[uint32][]*mesh.Service, []uint32) {
	byPort := map[uint32][]*mesh.Service{}
	var ports []uint32
	claimed := map[uint32]bool{}
	for _, el := range scope.Listeners {
		n := el.Port.Number
		if !el.Port.Protocol.IsHTTP() || claimed[n] {
			continue
		}
		claimed[n] = true
		ports = append(ports, n)
		for _, svc := range el.Services {
			for _, p := range svc.Ports {
				if p.Number == n {
					byPort[n] = append(byPort[n], svc)
					break
				}
			}
		}
	}
	for _, svc := range scope.CatchAll {
		for _, p := range svc.Ports {
			if p.Protocol.IsHTTP() && p.Number != OutboundCapturePort && p.Number != InboundCapturePort && !claimed[p.Number] {
				byPort[p.Number] = append(byPort[p.Number], svc)
				ports = append(ports, p.Number)
			}
		}
	}
	return byPort, sortedUnique(ports)
}
