package validate

import (
	"fmt"
	"regexp"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig/fielderr"
)

// Gateway server protocols Strait builds (Istio's protocol names, upper
// case). HTTP, HTTP2 and GRPC servers are plaintext HTTP (an HCM on the
// route http.PORT); HTTPS terminates TLS (SIMPLE, MUTUAL) into an HCM or
// passes it through by SNI (PASSTHROUGH); TCP proxies the connection; TLS
// terminates or passes TLS through and then proxies TCP.
var gatewayProtocols = map[string]bool{"HTTP": true, "HTTP2": true, "GRPC": true, "HTTPS": true, "TCP": true, "TLS": true}

// GatewayProtocolIsTLS reports whether a server protocol carries TLS on
// the wire (HTTPS, TLS).
func GatewayProtocolIsTLS(p string) bool {
	p = strings.ToUpper(p)
	return p == "HTTPS" || p == "TLS"
}

// GatewayProtocolIsHTTP reports whether a plaintext server protocol is
// served by an HTTP connection manager (HTTP, HTTP2, GRPC).
func GatewayProtocolIsHTTP(p string) bool {
	p = strings.ToUpper(p)
	return p == "HTTP" || p == "HTTP2" || p == "GRPC"
}

// validateGateway checks a Gateway as Istio's ValidateGateway does, for
// what Strait builds: servers with a port, a protocol it builds, hosts
// (HOST or NAMESPACE/HOST), unique port names, one protocol family per
// port, and TLS settings that go with the protocol. A mode whose
// certificates are missing is an error naming the field.
func validateGateway(el *fielderr.List, s *networking.Gateway) {
	validateLabels(el, "spec.selector", s.Selector)
	if len(s.Servers) == 0 {
		el.Add("spec.servers", "must list at least one server")
	}
	names := map[string]int{}
	byPort := map[uint32]struct {
		tls   bool
		index int
		proto string
	}{}
	for i, srv := range s.Servers {
		f := fmt.Sprintf("spec.servers[%d]", i)
		if srv == nil {
			el.Add(f, "must not be null")
			continue
		}
		validateGatewayServer(el, f, srv)
		if p := srv.Port; p != nil {
			if p.Name != "" {
				if j, ok := names[p.Name]; ok {
					el.Add(f+".port.name", "%q is also the port name of spec.servers[%d]; port names must be unique", p.Name, j)
				} else {
					names[p.Name] = i
				}
			}
			proto := strings.ToUpper(p.Protocol)
			if prev, ok := byPort[p.Number]; ok && p.Number != 0 {
				// Istio: on one port either plaintext servers of one
				// protocol or TLS servers told apart by SNI.
				switch {
				case prev.tls != GatewayProtocolIsTLS(proto):
					el.Add(f+".port.protocol", "%s on port %d conflicts with %s of spec.servers[%d]: a port carries either TLS (HTTPS, TLS) or plaintext servers", proto, p.Number, prev.proto, prev.index)
				case !prev.tls:
					el.Add(f+".port", "port %d is also the port of spec.servers[%d]; plaintext servers cannot share a port (list their hosts in one server)", p.Number, prev.index)
				}
			} else {
				byPort[p.Number] = struct {
					tls   bool
					index int
					proto string
				}{GatewayProtocolIsTLS(proto), i, proto}
			}
		}
	}
}

func validateGatewayServer(el *fielderr.List, f string, srv *networking.Server) {
	proto := ""
	if srv.Port == nil {
		el.Add(f+".port", "is required (e.g. {number: 80, name: http, protocol: HTTP})")
	} else {
		if !validPort(srv.Port.Number) {
			el.Add(f+".port.number", "%d is not a valid port (1-65535)", srv.Port.Number)
		}
		proto = strings.ToUpper(srv.Port.Protocol)
		if !gatewayProtocols[proto] {
			el.Add(f+".port.protocol", "%q is not a gateway protocol Strait builds (HTTP, HTTPS, HTTP2, GRPC, TCP, TLS)", srv.Port.Protocol)
		}
		if srv.Port.Name == "" {
			el.Add(f+".port.name", "is required (Istio names the HTTPS route of a server by it)")
		} else if !dns1123Label.MatchString(srv.Port.Name) {
			el.Add(f+".port.name", "%q is not a valid port name (lower-case letters, digits and '-')", srv.Port.Name)
		}
	}
	if len(srv.Hosts) == 0 {
		el.Add(f+".hosts", "must list at least one host (e.g. \"*\", \"example.com\" or \"ns/*.example.com\")")
	}
	for j, h := range srv.Hosts {
		hf := fmt.Sprintf("%s.hosts[%d]", f, j)
		host := h
		if ns, rest, ok := strings.Cut(h, "/"); ok {
			if ns != "*" && ns != "." && !dns1123Label.MatchString(ns) {
				el.Add(hf, "namespace %q is not a namespace name, \"*\" or \".\"", ns)
			}
			host = rest
		}
		if host != "*" {
			validateHost(el, hf, host)
		}
	}
	if srv.Name != "" && (strings.Contains(srv.Name, ".") || strings.ContainsAny(srv.Name, " /")) {
		el.Add(f+".name", "%q may not contain '.', '/' or spaces (it is part of the route name https.PORT.NAME.GATEWAY.NAMESPACE)", srv.Name)
	}
	validateServerTLS(el, f, proto, srv.Tls)
}

// validateServerTLS: HTTPS and TLS servers need tls; on a plaintext server
// tls may only carry httpsRedirect (an HTTP server's); SIMPLE and MUTUAL
// need the certificate files, MUTUAL also the CA certificates;
// ISTIO_MUTUAL takes none (the workload certificate).
func validateServerTLS(el *fielderr.List, f, proto string, t *networking.ServerTLSSettings) {
	tf := f + ".tls"
	if !GatewayProtocolIsTLS(proto) {
		if t == nil {
			return
		}
		if t.HttpsRedirect && proto != "HTTP" {
			el.Add(tf+".httpsRedirect", "is for HTTP servers (a 301 to https); this server is %s", proto)
		}
		if t.Mode != networking.ServerTLSSettings_PASSTHROUGH || t.ServerCertificate != "" || t.PrivateKey != "" || t.CaCertificates != "" || t.CredentialName != "" {
			el.Add(tf, "a %s server carries no TLS: only httpsRedirect may be set (use HTTPS or TLS to terminate TLS)", proto)
		}
		return
	}
	if t == nil {
		el.Add(tf, "is required on a %s server (mode SIMPLE or MUTUAL with serverCertificate and privateKey, or PASSTHROUGH)", proto)
		return
	}
	if t.HttpsRedirect {
		el.Add(tf+".httpsRedirect", "is for HTTP servers; this server is %s", proto)
	}
	switch t.Mode {
	case networking.ServerTLSSettings_SIMPLE, networking.ServerTLSSettings_MUTUAL:
		if t.CredentialName != "" {
			// Istio: the credential holds the certificate, the key and,
			// for MUTUAL, the CA certificates (ca.crt, or NAME-cacert).
			if t.ServerCertificate != "" || t.PrivateKey != "" || t.CaCertificates != "" {
				el.Add(tf+".credentialName", "names the certificate, key and CA certificates: remove serverCertificate, privateKey and caCertificates, or credentialName")
			}
			if len(t.CredentialName) > 253 || !dns1123Subdomain.MatchString(t.CredentialName) {
				el.Add(tf+".credentialName", "%q is not a Secret name (lower-case letters, digits, '-' and '.')", t.CredentialName)
			}
			break
		}
		if t.ServerCertificate == "" {
			el.Add(tf+".serverCertificate", "is required with mode %s (the path of a PEM certificate chain on the gateway), or credentialName", t.Mode)
		}
		if t.PrivateKey == "" {
			el.Add(tf+".privateKey", "is required with mode %s (the path of a PEM private key on the gateway), or credentialName", t.Mode)
		}
		if t.Mode == networking.ServerTLSSettings_MUTUAL && t.CaCertificates == "" {
			el.Add(tf+".caCertificates", "is required with mode MUTUAL (the path of the PEM CA certificates that client certificates are checked against)")
		}
		if t.Mode == networking.ServerTLSSettings_SIMPLE && t.CaCertificates != "" {
			el.Add(tf+".caCertificates", "is for mode MUTUAL; with SIMPLE no client certificate is asked for")
		}
	case networking.ServerTLSSettings_ISTIO_MUTUAL:
		// Istio: the gateway's own workload certificate, and client
		// certificates of the mesh (an egress gateway's sidecars).
		if t.ServerCertificate != "" || t.PrivateKey != "" || t.CaCertificates != "" || t.CredentialName != "" {
			el.Add(tf+".mode", "ISTIO_MUTUAL uses the gateway's workload certificate and the mesh's CA: remove serverCertificate, privateKey, caCertificates and credentialName, or use SIMPLE or MUTUAL")
		}
	case networking.ServerTLSSettings_PASSTHROUGH:
		if t.ServerCertificate != "" || t.PrivateKey != "" || t.CaCertificates != "" || t.CredentialName != "" {
			el.Add(tf+".mode", "PASSTHROUGH does not terminate TLS: remove serverCertificate, privateKey, caCertificates and credentialName, or use SIMPLE")
		}
	}
	for _, p := range []struct{ field, path string }{{"serverCertificate", t.ServerCertificate}, {"privateKey", t.PrivateKey}, {"caCertificates", t.CaCertificates}} {
		if p.path != "" && (!strings.HasPrefix(p.path, "/") || strings.ContainsAny(p.path, "~\n")) {
			el.Add(tf+"."+p.field, "%q is not an absolute file path without '~'", p.path)
		}
	}
}

// dns1123Subdomain is a Kubernetes object name (a Secret's).
var dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
