package kube

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/straitmesh/strait/internal/protocol"
)

// servicePortProtocol returns a Service port's protocol as Istio derives
// it: a UDP port is UDP; else a known appProtocol wins; else the port
// name's "<protocol>[-suffix]" prefix; else TCP. ok is false for protocols
// the mesh does not carry (SCTP).
func servicePortProtocol(p corev1.ServicePort) (protocol.Protocol, bool) {
	switch p.Protocol {
	case corev1.ProtocolUDP:
		return protocol.UDP, true
	case corev1.ProtocolSCTP:
		return "", false
	}
	if p.AppProtocol != nil {
		if proto, ok := protocol.FromAppProtocol(*p.AppProtocol); ok {
			return proto, true
		}
	}
	return protocol.FromPortName(p.Name), true
}
