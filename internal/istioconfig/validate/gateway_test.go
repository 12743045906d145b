package validate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/istioconfig"
)

func gatewayDoc(servers string) string {
	return "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: ingress}\nspec:\n  selector: {istio: ingressgateway}\n  servers:\n" + servers
}

// TestGatewayValidation: what a Gateway may say, and every refusal names
// its field.
func TestGatewayValidation(t *testing.T) {
	const (
		http  = "  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: ['*']\n"
		https = "  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: [ingress/www.example.com]\n    tls: {mode: SIMPLE, serverCertificate: /etc/gw/cert.pem, privateKey: /etc/gw/key.pem}\n"
	)
	for _, tc := range []struct {
		name    string
		servers string
		want    string // "" = loads
		refused bool   // the problem is istioconfig.ErrNotSupported
	}{
		{name: "http", servers: http},
		{name: "https simple", servers: https},
		{name: "https redirect", servers: "  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: ['*']\n    tls: {httpsRedirect: true}\n"},
		{name: "passthrough", servers: "  - port: {number: 443, name: tls, protocol: TLS}\n    hosts: ['*.example.com']\n    tls: {mode: PASSTHROUGH}\n"},
		{name: "mutual", servers: "  - port: {number: 443, name: mtls, protocol: HTTPS}\n    hosts: ['a.example.com']\n    tls: {mode: MUTUAL, serverCertificate: /c, privateKey: /k, caCertificates: /ca}\n"},
		{name: "tcp and grpc", servers: "  - port: {number: 9000, name: tcp, protocol: TCP}\n    hosts: ['*']\n  - port: {number: 9090, name: grpc, protocol: GRPC}\n    hosts: ['*']\n"},
		{name: "two https on one port", servers: https + strings.NewReplacer("name: https", "name: https-b", "www.", "api.").Replace(https)},
		{name: "credentialName", servers: "  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: ['*']\n    tls: {mode: MUTUAL, credentialName: web-cert}\n"},
		{name: "credentialName with files", servers: "  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: ['*']\n    tls: {mode: SIMPLE, credentialName: cert, privateKey: /k}\n",
			want: "spec.servers[0].tls.credentialName: names the certificate, key and CA certificates"},
		{name: "credentialName not a name", servers: "  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: ['*']\n    tls: {mode: SIMPLE, credentialName: ../x}\n",
			want: `spec.servers[0].tls.credentialName: "../x" is not a Secret name`},
		{name: "credentialNames refused", servers: "  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: ['*']\n    tls: {mode: SIMPLE, credentialNames: [a, b]}\n",
			want: "spec.servers[0].tls.credentialNames: not supported by Strait yet", refused: true},
		{name: "istio mutual", servers: "  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: ['*']\n    tls: {mode: ISTIO_MUTUAL}\n"},
		{name: "istio mutual with files", servers: "  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: ['*']\n    tls: {mode: ISTIO_MUTUAL, credentialName: cert}\n",
			want: "spec.servers[0].tls.mode: ISTIO_MUTUAL uses the gateway's workload certificate"},
		{name: "auto passthrough refused", servers: "  - port: {number: 15443, name: tls, protocol: TLS}\n    hosts: ['*']\n    tls: {mode: AUTO_PASSTHROUGH}\n",
			want: "spec.servers[0].tls.mode: AUTO_PASSTHROUGH not supported by Strait yet", refused: true},
		{name: "bind refused", servers: "  - port: {number: 80, name: http, protocol: HTTP}\n    bind: 127.0.0.1\n    hosts: ['*']\n",
			want: "spec.servers[0].bind: not supported by Strait yet", refused: true},
		{name: "mongo", servers: "  - port: {number: 27017, name: mongo, protocol: MONGO}\n    hosts: ['*']\n",
			want: `spec.servers[0].port.protocol: "MONGO" is not a gateway protocol Strait builds`},
		{name: "no hosts", servers: "  - port: {number: 80, name: http, protocol: HTTP}\n", want: "spec.servers[0].hosts: must list at least one host"},
		{name: "bad ns", servers: "  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: ['Bad_NS/x.com']\n", want: `spec.servers[0].hosts[0]: namespace "Bad_NS"`},
		{name: "https without tls", servers: "  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: ['*']\n", want: "spec.servers[0].tls: is required on a HTTPS server"},
		{name: "simple without key", servers: "  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: ['*']\n    tls: {mode: SIMPLE, serverCertificate: /c}\n",
			want: "spec.servers[0].tls.privateKey: is required with mode SIMPLE"},
		{name: "mutual without ca", servers: "  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: ['*']\n    tls: {mode: MUTUAL, serverCertificate: /c, privateKey: /k}\n",
			want: "spec.servers[0].tls.caCertificates: is required with mode MUTUAL"},
		{name: "relative cert", servers: "  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: ['*']\n    tls: {mode: SIMPLE, serverCertificate: c.pem, privateKey: /k}\n",
			want: `spec.servers[0].tls.serverCertificate: "c.pem" is not an absolute file path`},
		{name: "tls on http", servers: "  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: ['*']\n    tls: {mode: SIMPLE, serverCertificate: /c, privateKey: /k}\n",
			want: "spec.servers[0].tls: a HTTP server carries no TLS"},
		{name: "redirect on https", servers: "  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: ['*']\n    tls: {httpsRedirect: true, mode: SIMPLE, serverCertificate: /c, privateKey: /k}\n",
			want: "spec.servers[0].tls.httpsRedirect: is for HTTP servers"},
		{name: "http and https on one port", servers: http + strings.Replace(https, "number: 443", "number: 80", 1),
			want: "spec.servers[1].port.protocol: HTTPS on port 80 conflicts with HTTP of spec.servers[0]"},
		{name: "two http on one port", servers: http + strings.Replace(http, "name: http", "name: http2", 1),
			want: "spec.servers[1].port: port 80 is also the port of spec.servers[0]"},
		{name: "duplicate port name", servers: http + strings.Replace(http, "number: 80", "number: 81", 1),
			want: `spec.servers[1].port.name: "http" is also the port name of spec.servers[0]`},
		{name: "no servers", servers: "", want: "spec.servers: must list at least one server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := istioconfig.ParseFile("gw.yaml", []byte(gatewayDoc(tc.servers)))
			if tc.want == "" {
				if res.Err != nil || len(res.Configs) != 1 || res.Configs[0].Gateway() == nil {
					t.Fatalf("err = %v, %d configs", res.Err, len(res.Configs))
				}
				return
			}
			if res.Err == nil || !strings.Contains(res.Err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant %q", res.Err, tc.want)
			}
			if got := errors.Is(res.Err, istioconfig.ErrNotSupported); got != tc.refused {
				t.Errorf("errors.Is(istioconfig.ErrNotSupported) = %v", got)
			}
		})
	}
}
