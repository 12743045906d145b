package gen

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"strconv"
	"strings"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/model"
	"github.com/straitmesh/strait/internal/nds"
)

// kubeServiceConfigPrefix starts the config name of the ServiceEntry the
// Kubernetes registry derives from a Service (internal/registry/kube).
const kubeServiceConfigPrefix = "kubernetes-service."

// dnsCapture reports whether the proxy's agent proxies its pod's DNS
// (node metadata DNS_CAPTURE, from ISTIO_META_DNS_CAPTURE).
func dnsCapture(p *model.Proxy) bool {
	on, err := strconv.ParseBool(p.Metadata["DNS_CAPTURE"])
	return err == nil && on
}

// nameTable is the NDS name table of a proxy: every service in its scope
// with a non-wildcard host and IP addresses, as Istio builds it
// (pilot/pkg/networking/core BuildNameTable). Services of the Kubernetes
// registry carry their name and namespace, so the agent can answer their
// short names. Services without an address (resolution NONE headless
// services, ServiceEntries without addresses) are left out: the agent
// forwards their names to the pod's resolvers. It is nil for a proxy
// without DNS capture.
func nameTable(scope *mesh.Scope, proxy *model.Proxy) nds.NameTable {
	if !dnsCapture(proxy) {
		return nil
	}
	nt := nds.NameTable{}
	for _, svc := range scope.Services {
		if strings.HasPrefix(svc.Hostname, "*") {
			continue
		}
		var ips []string
		for _, a := range svc.Addresses {
			if ip, err := netip.ParseAddr(a); err == nil && !ip.IsUnspecified() {
				ips = append(ips, ip.String())
			}
		}
		if len(ips) == 0 {
			continue
		}
		ni := nds.NameInfo{IPs: ips}
		if name, ok := strings.CutPrefix(svc.Config.Name, kubeServiceConfigPrefix); ok &&
			strings.HasPrefix(svc.Hostname, name+"."+svc.Namespace+".svc.") {
			ni.Registry = nds.RegistryKubernetes
			ni.Shortname = name
			ni.Namespace = svc.Namespace
		}
		if old, ok := nt[svc.Hostname]; ok {
			// One host from several entries: all their addresses.
			ni.IPs = append(old.IPs, ni.IPs...)
		}
		nt[svc.Hostname] = ni
	}
	return nt
}

// generateNameTable is the NDS response: one nameless NameTable resource,
// as Istio's NDS sends it, or none for a proxy without DNS capture.
func generateNameTable(scope *mesh.Scope, proxy *model.Proxy) ([]*discovery.Resource, error) {
	nt := nameTable(scope, proxy)
	if nt == nil {
		return nil, nil
	}
	b := nds.Marshal(nt)
	sum := sha256.Sum256(b)
	return []*discovery.Resource{{
		Version:  hex.EncodeToString(sum[:12]),
		Resource: &anypb.Any{TypeUrl: nds.TypeURL, Value: b},
	}}, nil
}
