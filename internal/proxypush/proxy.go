// Package proxypush holds the types shared by the control plane's parts: the
// identity of a connected proxy and the push request that travels from the
// registries through debounce and the push queue to each connection.
package proxypush

import (
	"fmt"
	"net/netip"
	"strings"
)

// NodeType is the first field of a proxy's node id.
type NodeType string

const (
	// SidecarProxy is a proxy that runs beside an application.
	SidecarProxy NodeType = "sidecar"
	// Router is a gateway proxy.
	Router NodeType = "router"
)

// Proxy is what the control plane knows about one connected proxy. It is
// built once from the node in the first DiscoveryRequest and is read-only
// afterwards.
type Proxy struct {
	// ID is the full node id: sidecar~IP~POD.NS~NS.svc.cluster.local.
	ID        string
	Type      NodeType
	IP        string
	PodName   string
	Namespace string
	// DNSDomain is the last field of the node id, e.g. "NS.svc.cluster.local".
	DNSDomain string
	// Metadata holds the node metadata as strings (ISTIO_META_* without the prefix).
	Metadata map[string]string
	// Locality is the node's locality as "region/zone/subzone" (the
	// bootstrap's node.locality); empty when the node sent none, and then
	// the generator takes the proxy's WorkloadEntry's.
	Locality string
	// PeerIP is the address the connection comes from, as the xDS server
	// saw it (invalid when gRPC did not know it). The node id's IP is what
	// the proxy says of itself; PeerIP is where it is.
	PeerIP netip.Addr
	// Identity is who the connection authenticated as (a service
	// account token over TLS, as Istio's VerifiedIdentity on 15012); nil
	// when it did not.
	Identity *Identity
}

// Identity is an authenticated workload identity.
type Identity struct {
	Namespace, ServiceAccount string
}

// ParseNodeID parses a node id of the form TYPE~IP~POD.NS~DOMAIN.
func ParseNodeID(id string) (*Proxy, error) {
	parts := strings.Split(id, "~")
	if len(parts) != 4 {
		return nil, fmt.Errorf("node id %q: want 4 fields TYPE~IP~POD.NAMESPACE~DOMAIN separated by '~', got %d", id, len(parts))
	}
	p := &Proxy{ID: id, Type: NodeType(parts[0]), IP: parts[1], DNSDomain: parts[3]}
	switch p.Type {
	case SidecarProxy, Router:
	default:
		return nil, fmt.Errorf("node id %q: type %q is not %q or %q", id, parts[0], SidecarProxy, Router)
	}
	if p.IP == "" {
		return nil, fmt.Errorf("node id %q: empty IP field", id)
	}
	pod, ns, ok := strings.Cut(parts[2], ".")
	if !ok || pod == "" || ns == "" {
		return nil, fmt.Errorf("node id %q: third field %q is not POD.NAMESPACE", id, parts[2])
	}
	p.PodName, p.Namespace = pod, ns
	return p, nil
}

// NodeID formats a sidecar node id for the given pod.
func NodeID(ip, pod, namespace, domain string) string {
	return TypedNodeID(SidecarProxy, ip, pod, namespace, domain)
}

// TypedNodeID formats the node id of a proxy of type t (a sidecar, or a
// gateway's router).
func TypedNodeID(t NodeType, ip, pod, namespace, domain string) string {
	if domain == "" {
		domain = namespace + ".svc.cluster.local"
	}
	return fmt.Sprintf("%s~%s~%s.%s~%s", t, ip, pod, namespace, domain)
}
