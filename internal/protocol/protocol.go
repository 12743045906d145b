// Package protocol is the one table of service port protocols: the names
// Istio defines, how a port's explicit protocol, its Kubernetes
// appProtocol or its name select one, and what each means to the sidecar.
// The config validator, the service model and the registries all read it.
// It imports nothing of Strait's.
package protocol

import (
	"slices"
	"strings"
)

// Protocol is a service port's protocol, upper case as Istio spells it
// ("HTTP", "HTTP2", "GRPC", "TCP", "TLS", ...).
type Protocol string

// The protocols Istio defines (istio/pkg/config/protocol).
const (
	HTTP    Protocol = "HTTP"
	HTTP2   Protocol = "HTTP2"
	GRPC    Protocol = "GRPC"
	GRPCWeb Protocol = "GRPC-WEB"
	HTTPS   Protocol = "HTTPS"
	TCP     Protocol = "TCP"
	TLS     Protocol = "TLS"
	UDP     Protocol = "UDP"
	Mongo   Protocol = "MONGO"
	MySQL   Protocol = "MYSQL"
	Redis   Protocol = "REDIS"
)

// known maps the lower-case name of every protocol Istio defines to it.
var known = map[string]Protocol{
	"http":     HTTP,
	"http2":    HTTP2,
	"grpc":     GRPC,
	"grpc-web": GRPCWeb,
	"https":    HTTPS,
	"tcp":      TCP,
	"tls":      TLS,
	"udp":      UDP,
	"mongo":    Mongo,
	"mysql":    MySQL,
	"redis":    Redis,
}

// kubernetesAppProtocols are Kubernetes' own appProtocol names (KEP-3726).
var kubernetesAppProtocols = map[string]Protocol{
	"kubernetes.io/h2c": HTTP2,
	"kubernetes.io/ws":  HTTP,
	"kubernetes.io/wss": HTTPS,
}

// Parse returns the protocol named s, in any case; ok is false for a name
// Istio does not define.
func Parse(s string) (p Protocol, ok bool) {
	p, ok = known[strings.ToLower(s)]
	return p, ok
}

// Names returns the names of the protocols Istio defines, upper case and
// sorted, for error messages.
func Names() []string {
	out := make([]string, 0, len(known))
	for _, p := range known {
		out = append(out, string(p))
	}
	slices.Sort(out)
	return out
}

// FromAppProtocol returns the protocol a Kubernetes Service port's
// appProtocol names: an Istio protocol name or one of Kubernetes' own
// (kubernetes.io/h2c, ws, wss). ok is false for any other value.
func FromAppProtocol(s string) (Protocol, bool) {
	if p, ok := Parse(s); ok {
		return p, true
	}
	p, ok := kubernetesAppProtocols[strings.ToLower(s)]
	return p, ok
}

// FromPortName applies Istio's port naming convention ("<protocol>[-suffix]":
// "http", "http-web", "grpc-api", "grpc-web-ui", ...); anything else is TCP.
func FromPortName(name string) Protocol {
	name = strings.ToLower(name)
	// grpc-web contains the separator itself.
	if name == "grpc-web" || strings.HasPrefix(name, "grpc-web-") {
		return GRPCWeb
	}
	prefix, _, _ := strings.Cut(name, "-")
	if p, ok := known[prefix]; ok {
		return p
	}
	return TCP
}

// ForPort returns a port's protocol: its explicit protocol when set (upper
// cased; the config validator rejects names Istio does not define), else
// the one its name selects (FromPortName).
func ForPort(explicit, name string) Protocol {
	if explicit != "" {
		return Protocol(strings.ToUpper(explicit))
	}
	return FromPortName(name)
}

// IsHTTP reports whether the port carries HTTP that the sidecar routes at
// layer 7 (HTTP/1.1, HTTP/2, gRPC).
func (p Protocol) IsHTTP() bool {
	switch p {
	case HTTP, HTTP2, GRPC, GRPCWeb:
		return true
	}
	return false
}

// IsHTTP2 reports whether upstream connections must speak HTTP/2 (gRPC-Web
// too, as in Istio's protocol.IsHTTP2).
func (p Protocol) IsHTTP2() bool { return p == HTTP2 || p == GRPC || p == GRPCWeb }
