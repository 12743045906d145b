package gen

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"slices"
	"strings"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/nds"
	"github.com/straitmesh/strait/internal/proxypush"
)

// kubeServiceConfigPrefix starts the config name of the ServiceEntry the
// Kubernetes registry derives from a Service (internal/registry/kube).
const kubeServiceConfigPrefix = "kubernetes-service."

// nameTable is the NDS name table of a proxy: every service in its scope
// with a non-wildcard host and IP addresses, as Istio builds it
// (pkg/dns/server/name_table.go, BuildNameTable). Services of the
// Kubernetes registry carry their name and namespace, so the agent can
// answer their short names. A headless service (resolution NONE without an
// address: a Kubernetes Service with clusterIP None, or such a
// ServiceEntry) is listed with the addresses of its endpoints, as Istio
// lists a passthrough service's endpoints, so its name resolves to the
// pods as cluster DNS would. A ServiceEntry without addresses is in the
// scope of a DNS-capture proxy with its allocated address
// (mesh.Service.AutoAddresses), as Istio's auto-allocated VIPs, so its
// name resolves to the address the proxy's listeners use. It is nil for a
// proxy without DNS capture.
func nameTable(scope *mesh.Scope, proxy *proxypush.Proxy) nds.NameTable {
	if !mesh.DNSCapture(proxy) {
		return nil
	}
	nt := nds.NameTable{}
	for _, svc := range scope.Services {
		if strings.HasPrefix(svc.Hostname, "*") {
			continue
		}
		name, kube := strings.CutPrefix(svc.Config.Name, kubeServiceConfigPrefix)
		kube = kube && strings.HasPrefix(svc.Hostname, name+"."+svc.Namespace+".svc.")
		ips, headless := serviceIPs(svc)
		if headless {
			ips = headlessIPs(svc)
			if kube {
				addPodNames(nt, svc, name)
			}
		}
		if len(ips) == 0 {
			continue
		}
		ni := nds.NameInfo{IPs: ips}
		if kube {
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

// serviceIPs are the service's VIPs that are IP addresses (CIDRs are left
// out, as Istio does); headless says the service has no VIP and resolution
// NONE, so its name stands for its endpoints.
func serviceIPs(svc *mesh.Service) (ips []string, headless bool) {
	unspecified := len(svc.Addresses) == 0
	for _, a := range svc.Addresses {
		ip, err := netip.ParseAddr(a)
		switch {
		case err != nil:
		case ip.IsUnspecified():
			unspecified = true
		default:
			ips = append(ips, ip.String())
		}
	}
	return ips, len(ips) == 0 && unspecified && svc.Resolution == networking.ServiceEntry_NONE && len(svc.Ports) > 0
}

// addPodNames adds the per-pod names of a headless Kubernetes service
// named name: HOSTNAME.NAME.NS.svc.DOMAIN for each endpoint with a
// hostname (StatefulSet pods), as Istio's BuildNameTable adds them
// following Kubernetes' pod DNS, with the short name HOSTNAME.NAME so the
// agent also answers HOSTNAME.NAME.NS and, in the namespace,
// HOSTNAME.NAME.
func addPodNames(nt nds.NameTable, svc *mesh.Service, name string) {
	for _, ep := range svc.Endpoints {
		ip, err := netip.ParseAddr(ep.Address)
		if ep.Hostname == "" || err != nil {
			continue
		}
		host := ep.Hostname + "." + svc.Hostname
		ni := nt[host]
		if slices.Contains(ni.IPs, ip.String()) {
			continue
		}
		ni.IPs = append(ni.IPs, ip.String())
		ni.Registry = nds.RegistryKubernetes
		ni.Shortname = ep.Hostname + "." + name
		ni.Namespace = svc.Namespace
		nt[host] = ni
	}
}

// headlessIPs are the distinct IP addresses of a headless service's
// endpoints, in the endpoints' order (sorted by address). Endpoints that
// are not IPs (Unix sockets, names) are left out, as Istio skips them.
func headlessIPs(svc *mesh.Service) []string {
	var ips []string
	seen := map[netip.Addr]bool{}
	for _, ep := range svc.Endpoints {
		ip, err := netip.ParseAddr(ep.Address)
		if err != nil || ip.IsUnspecified() || seen[ip] {
			continue
		}
		seen[ip] = true
		ips = append(ips, ip.String())
	}
	return ips
}

// generateNameTable is the NDS response: one nameless NameTable resource,
// as Istio's NDS sends it, or none for a proxy without DNS capture.
func generateNameTable(scope *mesh.Scope, proxy *proxypush.Proxy) ([]*discovery.Resource, error) {
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
