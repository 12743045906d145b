package kube

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/straitmesh/strait/internal/registry"
)

// knownProtocols are the protocol names Istio understands, lower case.
var knownProtocols = map[string]registry.Protocol{
	"http":     registry.HTTP,
	"http2":    registry.HTTP2,
	"grpc":     registry.GRPC,
	"grpc-web": registry.GRPCWeb,
	"https":    registry.HTTPS,
	"tcp":      registry.TCP,
	"tls":      registry.TLS,
	"udp":      registry.UDP,
	"mongo":    "MONGO",
	"mysql":    "MYSQL",
	"redis":    "REDIS",
	// Kubernetes' own appProtocol names (KEP-3726).
	"kubernetes.io/h2c": registry.HTTP2,
	"kubernetes.io/ws":  registry.HTTP,
	"kubernetes.io/wss": registry.HTTPS,
}

// servicePortProtocol returns a Service port's protocol as Istio derives
// it: a UDP port is UDP; else a known appProtocol wins; else the port
// name's "<protocol>[-suffix]" prefix; else TCP. ok is false for protocols
// the mesh does not carry (SCTP).
func servicePortProtocol(p corev1.ServicePort) (registry.Protocol, bool) {
	switch p.Protocol {
	case corev1.ProtocolUDP:
		return registry.UDP, true
	case corev1.ProtocolSCTP:
		return "", false
	}
	if p.AppProtocol != nil {
		if proto, ok := knownProtocols[strings.ToLower(*p.AppProtocol)]; ok {
			return proto, true
		}
	}
	return protocolFromName(p.Name), true
}

// protocolFromName applies Istio's port naming convention: "http",
// "http-web", "grpc-api", "grpc-web-ui", ...; anything else is TCP.
func protocolFromName(name string) registry.Protocol {
	name = strings.ToLower(name)
	// grpc-web contains the separator itself.
	if name == "grpc-web" || strings.HasPrefix(name, "grpc-web-") {
		return registry.GRPCWeb
	}
	prefix, _, _ := strings.Cut(name, "-")
	if proto, ok := knownProtocols[prefix]; ok && !strings.Contains(prefix, "/") {
		return proto
	}
	return registry.TCP
}
