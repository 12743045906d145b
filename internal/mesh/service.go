// Package mesh is the service model: what the registries (packages
// registry/file and registry/kube) produce and the generators read —
// services, their ports and endpoints, workloads, the routing configs
// indexed by host, and each proxy's scope — all inside an immutable
// Snapshot.
package mesh

import (
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/protocol"
	"github.com/straitmesh/strait/internal/proxypush"
)

// Port is one service port.
type Port struct {
	Name     string
	Number   uint32
	Protocol protocol.Protocol
	// TargetPort is the workload port when the workload does not name one;
	// 0 means the same as Number.
	TargetPort uint32
}

// Service is one host of a ServiceEntry. A ServiceEntry with several hosts
// becomes several Services that share ports and endpoints.
type Service struct {
	Hostname  string
	Namespace string
	// Addresses are the VIPs (IPs or CIDRs) from spec.addresses.
	Addresses        []string
	Ports            []Port
	Resolution       networking.ServiceEntry_Resolution
	Location         networking.ServiceEntry_Location
	WorkloadSelector map[string]string // nil when the entry lists endpoints inline
	ExportTo         []string
	// Config is the ServiceEntry this service came from.
	Config proxypush.ConfigKey
	// Endpoints are sorted by address, then workload name.
	Endpoints []*Endpoint
	// AutoAddresses are the addresses straitd allocated to a service
	// without spec.addresses ([IPv4 in 240.240.0.0/16, IPv6 in
	// 2001:2::/48]; allocateAutoAddresses), as Istio's IP autoallocation does.
	// Only DNS-capture proxies use them: their scope holds a view of the
	// service whose Addresses is the one of their family (auto4, auto6).
	AutoAddresses []string
	auto4, auto6  *Service
}

// Port returns the service port with the given number.
func (s *Service) Port(number uint32) (Port, bool) {
	for _, p := range s.Ports {
		if p.Number == number {
			return p, true
		}
	}
	return Port{}, false
}

// ResolvesDNS reports whether the service's clusters resolve names
// (resolution DNS or DNS_ROUND_ROBIN): their endpoints are part of the
// cluster (CDS), not of EDS, so an endpoint change is not EDS-only.
func (s *Service) ResolvesDNS() bool {
	return s.Resolution == networking.ServiceEntry_DNS || s.Resolution == networking.ServiceEntry_DNS_ROUND_ROBIN
}

// VisibleTo reports whether a proxy in namespace ns may see the service
// (spec.exportTo: empty or "*" is everywhere, "." is the service's own
// namespace, anything else names a namespace).
func (s *Service) VisibleTo(ns string) bool {
	if len(s.ExportTo) == 0 {
		return true
	}
	for _, e := range s.ExportTo {
		if e == "*" || e == ns || (e == "." && ns == s.Namespace) {
			return true
		}
	}
	return false
}

// Endpoint is one address that serves a Service.
type Endpoint struct {
	Address string
	Labels  map[string]string
	// Ports maps a service port number to the port on this endpoint
	// (WorkloadEntry ports[portName], else targetPort, else the service port).
	Ports map[uint32]uint32
	// Workload is the WorkloadEntry behind the endpoint; zero for endpoints
	// listed inline in the ServiceEntry.
	Workload proxypush.ConfigKey
	// Weight is the endpoint's load balancing weight (0: unset, 1).
	Weight uint32
	// Locality is "region/zone/subzone" (trailing parts may be missing),
	// empty when unknown.
	Locality string
	// Hostname is the pod's DNS label under its Kubernetes Service (the
	// EndpointSlice endpoint's hostname: the pod's spec.hostname when its
	// spec.subdomain names the Service, as for StatefulSet pods), from
	// EndpointHostnamesAnnotation; empty for other endpoints.
	Hostname string
}

// EndpointHostnamesAnnotation is the annotation that, on the ServiceEntry
// the Kubernetes registry derives from a Service, carries its endpoints' hostnames as
// "ADDRESS=HOSTNAME,..." (the WorkloadEntry message has no field for
// them). A headless service's name table lists HOSTNAME.SERVICE-HOST for
// each.
const EndpointHostnamesAnnotation = "strait.internal/endpoint-hostnames"

// Matches reports whether every selector label is on the endpoint.
func (e *Endpoint) Matches(selector map[string]string) bool {
	return labelsMatch(selector, e.Labels)
}

func labelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if lv, ok := labels[k]; !ok || lv != v {
			return false
		}
	}
	return true
}

// Workload is a WorkloadEntry: one proxied workload.
type Workload struct {
	Name           string
	Namespace      string
	Address        string
	Labels         map[string]string
	Ports          map[string]uint32
	ServiceAccount string
	// Weight and Locality are the entry's weight and locality, which its
	// endpoints carry.
	Weight   uint32
	Locality string
}

// ServiceInstance is one service port served by a workload: the inbound
// side of a proxy.
type ServiceInstance struct {
	Service *Service
	Port    Port
	// EndpointPort is the port the workload listens on for Port.
	EndpointPort uint32
}
