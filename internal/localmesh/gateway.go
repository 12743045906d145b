package localmesh

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/straitmesh/strait/internal/istioconfig"
)

// A WorkloadEntry that a Gateway's selector matches is a gateway pod, as
// a Kubernetes pod labelled istio: ingressgateway is: `straitctl local
// up` runs `strait-agent proxy router` in it with no capture and no app,
// and the host reaches the Gateway's servers on the pod's address.
// A Gateway with no selector (which in Istio selects every gateway pod)
// makes no pod a gateway by itself.
//
// A Gateway's tls.credentialName NAME is, in Kubernetes, a Secret of the
// gateway's namespace; here it is the directory
// CONFIG_DIR/credentials/NAMESPACE/NAME with the Secret's keys as files
// (tls.crt, tls.key, and ca.crt and an optional ca.crl for MUTUAL).
// local up copies the gateway's namespace's credentials into the pod's
// var/run/secrets/credentials, where its agent serves them over SDS
// (kubernetes://NAME), as a mounted Secret volume would hold them.

// CredentialsDir is the directory of a config dir that holds the gateway
// credentials, by namespace and name.
const CredentialsDir = "credentials"

// GatewayServer is one server a gateway pod runs, for local up's table.
type GatewayServer struct {
	// Gateway is the Gateway's NAMESPACE/NAME.
	Gateway string
	// Protocol is the server's (upper case): HTTP, HTTPS, HTTP2, GRPC,
	// TCP or TLS.
	Protocol string
	// Addr is where the host reaches it: the pod's address and the port.
	Addr netip.AddrPort
	// Hosts are the server's hosts.
	Hosts []string
}

// URL is how a client on the host calls the server: http:// or https://
// for HTTP servers, tcp:// or tls:// for the others.
func (s GatewayServer) URL() string {
	scheme := "tcp"
	switch s.Protocol {
	case "HTTP", "HTTP2", "GRPC":
		scheme = "http"
	case "HTTPS":
		scheme = "https"
	case "TLS":
		scheme = "tls"
	}
	return fmt.Sprintf("%s://%s", scheme, s.Addr)
}

func (s GatewayServer) String() string {
	return fmt.Sprintf("%s %s (Gateway %s, hosts %s)", s.Protocol, s.URL(), s.Gateway, strings.Join(s.Hosts, ","))
}

// gatewayServers are the servers of the Gateways (with a selector) that
// select labels, for a pod at ip, by port then Gateway.
func gatewayServers(gws []*istioconfig.Config, labels map[string]string, ip netip.Addr) []GatewayServer {
	var out []GatewayServer
	for _, c := range gws {
		spec := c.Gateway()
		if len(spec.GetSelector()) == 0 || !selects(spec.GetSelector(), labels) {
			continue
		}
		for _, srv := range spec.GetServers() {
			out = append(out, GatewayServer{
				Gateway:  c.Namespace + "/" + c.Name,
				Protocol: strings.ToUpper(srv.GetPort().GetProtocol()),
				Addr:     netip.AddrPortFrom(ip, uint16(srv.GetPort().GetNumber())),
				Hosts:    slices.Clone(srv.GetHosts()),
			})
		}
	}
	slices.SortStableFunc(out, func(a, b GatewayServer) int {
		return cmp.Or(cmp.Compare(a.Addr.Port(), b.Addr.Port()), strings.Compare(a.Gateway, b.Gateway))
	})
	return out
}

// copyCredentials copies CONFIG_DIR/credentials/NAMESPACE/NAME/FILE of
// the gateway pod's namespace into the pod's credentials directory
// (regular files only; preparePod then gives them to the pod's proxy
// user). A config dir without credentials copies nothing.
func copyCredentials(configDir string, p *Pod) error {
	src := filepath.Join(configDir, CredentialsDir, p.Namespace)
	dst := filepath.Join(p.dir, "var", "run", "secrets", "credentials")
	entries, err := os.ReadDir(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("gateway credentials: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(src, e.Name()))
		if err != nil {
			return fmt.Errorf("gateway credentials: %w", err)
		}
		if err := os.MkdirAll(filepath.Join(dst, e.Name()), 0o700); err != nil {
			return err
		}
		for _, f := range files {
			if !f.Type().IsRegular() {
				continue
			}
			data, err := os.ReadFile(filepath.Join(src, e.Name(), f.Name()))
			if err != nil {
				return fmt.Errorf("gateway credentials: %w", err)
			}
			if err := os.WriteFile(filepath.Join(dst, e.Name(), f.Name()), data, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}
