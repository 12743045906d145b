package validate

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig/fielderr"
	"github.com/straitmesh/strait/internal/protocol"
)

// This file checks a Sidecar (validateSidecar).

// validateSidecar checks the parts of a Sidecar that Strait uses: the
// egress listeners (ports, binds, the catch-all listener last), their
// hosts ("NAMESPACE/HOST", NAMESPACE being a name, "*", "." or "~") and
// the workload selector's labels.
func validateSidecar(el *fielderr.List, s *networking.Sidecar) {
	if s.WorkloadSelector != nil {
		validateLabels(el, "spec.workloadSelector.labels", s.WorkloadSelector.Labels)
	}
	if len(s.Egress) == 0 && len(s.Ingress) == 0 && s.OutboundTrafficPolicy == nil && s.InboundConnectionPool == nil {
		el.Add("spec", "is empty; set egress, ingress, outboundTrafficPolicy or inboundConnectionPool (Istio refuses an empty Sidecar)")
	}
	validateConnectionPool(el, "spec.inboundConnectionPool", s.InboundConnectionPool)
	for i, in := range s.Ingress {
		if in != nil {
			validateConnectionPool(el, fmt.Sprintf("spec.ingress[%d].connectionPool", i), in.ConnectionPool)
		}
	}
	inPorts := map[uint32]bool{}
	for i, in := range s.Ingress {
		validateIngress(el, fmt.Sprintf("spec.ingress[%d]", i), in, inPorts)
	}
	ports := map[uint32]bool{}
	for i, eg := range s.Egress {
		ef := fmt.Sprintf("spec.egress[%d]", i)
		if eg.Port == nil {
			if i != len(s.Egress)-1 {
				el.Add(ef+".port", "is required on every egress listener but the last (the catch-all listener without a port comes last, and only once)")
			}
			if eg.Bind != "" || eg.CaptureMode != networking.CaptureMode_DEFAULT {
				el.Add(ef+".port", "is required with bind or captureMode (the catch-all listener has neither)")
			}
		} else {
			validateEgressPort(el, ef, eg, ports)
		}
		if len(eg.Hosts) == 0 {
			el.Add(fmt.Sprintf("spec.egress[%d].hosts", i), "must list at least one NAMESPACE/HOST (e.g. \"./*\" or \"istio-system/*\")")
		}
		for j, h := range eg.Hosts {
			f := fmt.Sprintf("spec.egress[%d].hosts[%d]", i, j)
			ns, host, ok := strings.Cut(h, "/")
			if !ok || ns == "" {
				el.Add(f, "%q is not NAMESPACE/HOST (e.g. \"./*\", \"*/reviews.default.svc.cluster.local\")", h)
				continue
			}
			if ns != "*" && ns != "." && ns != "~" && !dns1123Label.MatchString(ns) {
				el.Add(f, "namespace %q is not a namespace name, \"*\", \".\" or \"~\"", ns)
			}
			if host != "*" {
				validateHost(el, f, host)
			}
		}
	}
}

// validateIngress checks an ingress listener: a port (as an egress
// listener's) and a defaultEndpoint Strait can send to.
func validateIngress(el *fielderr.List, f string, in *networking.IstioIngressListener, ports map[uint32]bool) {
	if in.Port == nil {
		el.Add(f+".port", "is required on an ingress listener (e.g. {number: 9080, protocol: HTTP, name: http})")
	} else {
		validateListenerPort(el, f, in.Port, ports)
	}
	if in.Bind != "" {
		if _, err := netip.ParseAddr(in.Bind); err != nil {
			el.Add(f+".bind", "%q is not an IP address (e.g. the workload's own address)", in.Bind)
		}
		if in.CaptureMode != networking.CaptureMode_NONE {
			el.Add(f+".bind", "applies only with captureMode: NONE (a captured port is served by virtualInbound); set captureMode NONE or remove bind")
		}
	}
	ep := in.DefaultEndpoint
	if ep == "" {
		return
	}
	if strings.HasPrefix(ep, "unix://") {
		el.Add(f+".defaultEndpoint", "%q: unix domain socket endpoints are not supported by Strait yet (use 127.0.0.1:PORT or 0.0.0.0:PORT)", ep)
		return
	}
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		el.Add(f+".defaultEndpoint", "%q is not HOST:PORT (127.0.0.1:PORT, [::1]:PORT or 0.0.0.0:PORT)", ep)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || !validPort(uint32(n)) {
		el.Add(f+".defaultEndpoint", "%q: port %q is not 1-65535", ep, port)
	}
	switch host {
	case "127.0.0.1", "::1", "0.0.0.0":
	case "::":
		el.Add(f+".defaultEndpoint", "%q: the workload's IPv6 address is not supported by Strait yet (use 0.0.0.0:PORT or [::1]:PORT)", ep)
	default:
		el.Add(f+".defaultEndpoint", "%q: the host must be 127.0.0.1, [::1] or 0.0.0.0 (the workload's own address)", ep)
	}
}

// validateEgressPort checks an egress listener with a port: its port and
// an IP address to bind.
func validateEgressPort(el *fielderr.List, ef string, eg *networking.IstioEgressListener, ports map[uint32]bool) {
	validateListenerPort(el, ef, eg.Port, ports)
	if eg.Bind != "" {
		if _, err := netip.ParseAddr(eg.Bind); err != nil {
			el.Add(ef+".bind", "%q is not an IP address (e.g. 127.0.0.1; unix domain sockets are not supported by Strait yet)", eg.Bind)
		}
	}
}

// validateListenerPort checks the port of an egress or ingress listener:
// a TCP port the sidecar's own listeners do not use, unique among the
// Sidecar's listeners of that direction, a protocol Istio defines other
// than UDP, and a valid name.
func validateListenerPort(el *fielderr.List, ef string, sp *networking.SidecarPort, ports map[uint32]bool) {
	n := sp.Number
	switch {
	case !validPort(n):
		el.Add(ef+".port.number", "must be 1-65535, got %d (unix domain socket listeners are not supported by Strait yet)", n)
	case n == 15001 || n == 15006 || n == 15000 || n == 15020 || n == 15021 || n == 15090:
		el.Add(ef+".port.number", "%d is a port of the sidecar's own listeners; pick another", n)
	case ports[n]:
		el.Add(ef+".port.number", "%d is already the port of an earlier listener; ports must be unique", n)
	}
	ports[n] = true
	p, ok := protocol.Parse(sp.Protocol)
	switch {
	case !ok:
		el.Add(ef+".port.protocol", "%q is not a protocol Istio defines (one of %s)", sp.Protocol, strings.Join(protocol.Names(), ", "))
	case p == protocol.UDP:
		el.Add(ef+".port.protocol", "UDP listeners are not supported by Strait yet (use TCP, HTTP, HTTP2, GRPC, TLS, ...)")
	}
	if sp.Name != "" && !portNameRe.MatchString(sp.Name) {
		el.Add(ef+".port.name", "%q is not a port name (letters, digits, '-', '_' and '.', e.g. http-local)", sp.Name)
	}
}
