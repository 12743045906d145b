// Package istioconfig holds the Istio config kinds Strait reads (the
// istio.io/api networking and security types): YAML loading, validation
// as Istio's admission webhook does it (validate_<kind>.go), the table of
// fields Strait honours or refuses (support_<group>.go, printed into
// docs/istio-fields.md), and an immutable Store of loaded configs.
package istioconfig

import (
	"fmt"
	"maps"
	"time"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"

	"github.com/straitmesh/strait/internal/proxypush"
)

// The kinds Strait understands.
const (
	KindServiceEntry    proxypush.Kind = "ServiceEntry"
	KindWorkloadEntry   proxypush.Kind = "WorkloadEntry"
	KindVirtualService  proxypush.Kind = "VirtualService"
	KindDestinationRule proxypush.Kind = "DestinationRule"
	KindSidecar         proxypush.Kind = "Sidecar"
	KindGateway         proxypush.Kind = "Gateway"

	KindAuthorizationPolicy   proxypush.Kind = "AuthorizationPolicy"
	KindPeerAuthentication    proxypush.Kind = "PeerAuthentication"
	KindRequestAuthentication proxypush.Kind = "RequestAuthentication"
)

// NetworkingGroup is the API group of the networking kinds.
const NetworkingGroup = "networking.istio.io"

// SecurityGroup is the API group of the security kinds.
const SecurityGroup = "security.istio.io"

// GroupOf is the API group of a supported kind ("" for another kind).
func GroupOf(kind proxypush.Kind) string {
	switch kind {
	case KindAuthorizationPolicy, KindPeerAuthentication, KindRequestAuthentication:
		return SecurityGroup
	case KindServiceEntry, KindWorkloadEntry, KindVirtualService, KindDestinationRule, KindSidecar, KindGateway:
		return NetworkingGroup
	}
	return ""
}

// DefaultNamespace is used when metadata.namespace is empty.
const DefaultNamespace = "default"

// Kinds lists the supported kinds in a fixed order.
var Kinds = []proxypush.Kind{KindServiceEntry, KindWorkloadEntry, KindVirtualService, KindDestinationRule, KindSidecar,
	KindGateway, KindAuthorizationPolicy, KindPeerAuthentication, KindRequestAuthentication}

// acceptedVersions are the versions we read, by API group.
var acceptedVersions = map[string]map[string]bool{
	NetworkingGroup: {"v1": true, "v1beta1": true, "v1alpha3": true},
	SecurityGroup:   {"v1": true, "v1beta1": true},
}

// newSpec returns an empty spec message for a supported kind, or nil.
func newSpec(kind proxypush.Kind) proto.Message {
	switch kind {
	case KindServiceEntry:
		return &networking.ServiceEntry{}
	case KindWorkloadEntry:
		return &networking.WorkloadEntry{}
	case KindVirtualService:
		return &networking.VirtualService{}
	case KindDestinationRule:
		return &networking.DestinationRule{}
	case KindSidecar:
		return &networking.Sidecar{}
	case KindGateway:
		return &networking.Gateway{}
	case KindAuthorizationPolicy:
		return &security.AuthorizationPolicy{}
	case KindPeerAuthentication:
		return &security.PeerAuthentication{}
	case KindRequestAuthentication:
		return &security.RequestAuthentication{}
	}
	return nil
}

// Meta is the part of a config object outside its spec.
type Meta struct {
	Kind       proxypush.Kind
	APIVersion string // as written, e.g. "networking.istio.io/v1"
	Name       string
	Namespace  string
	Labels     map[string]string
	// Annotations are the object's annotations (AuthorizationPolicy's
	// istio.io/dry-run).
	Annotations map[string]string
	// CreationTime is metadata.creationTimestamp (zero when the document
	// has none, as in most files): among policies of equal scope Istio
	// applies the oldest (then the first by name).
	CreationTime time.Time
	// Source says where the object was read from, for messages.
	Source Source
}

// Source locates a config object in its file.
type Source struct {
	File     string
	Document int // 1-based among non-empty documents
}

func (s Source) String() string { return fmt.Sprintf("%s: document %d", s.File, s.Document) }

// Config is one config object. Spec is one of the networking.istio.io
// messages (*networking.ServiceEntry, ...). A Config is read-only once
// loaded: it is shared by every snapshot that holds it.
type Config struct {
	Meta
	Spec proto.Message
}

// Key identifies the config.
func (c *Config) Key() proxypush.ConfigKey {
	return proxypush.ConfigKey{Kind: c.Kind, Name: c.Name, Namespace: c.Namespace}
}

// Equal reports whether two configs have the same identity, labels and spec
// (the source location is ignored).
func (c *Config) Equal(o *Config) bool {
	if c == o {
		return true // registries reuse unchanged configs between stores
	}
	if c == nil || o == nil {
		return false
	}
	if c.Key() != o.Key() || !maps.Equal(c.Labels, o.Labels) || !maps.Equal(c.Annotations, o.Annotations) || !c.CreationTime.Equal(o.CreationTime) {
		return false
	}
	return proto.Equal(c.Spec, o.Spec)
}

// ServiceEntry returns the spec if c is a ServiceEntry, else nil.
func (c *Config) ServiceEntry() *networking.ServiceEntry {
	s, _ := c.Spec.(*networking.ServiceEntry)
	return s
}

// WorkloadEntry returns the spec if c is a WorkloadEntry, else nil.
func (c *Config) WorkloadEntry() *networking.WorkloadEntry {
	s, _ := c.Spec.(*networking.WorkloadEntry)
	return s
}

// VirtualService returns the spec if c is a VirtualService, else nil.
func (c *Config) VirtualService() *networking.VirtualService {
	s, _ := c.Spec.(*networking.VirtualService)
	return s
}

// DestinationRule returns the spec if c is a DestinationRule, else nil.
func (c *Config) DestinationRule() *networking.DestinationRule {
	s, _ := c.Spec.(*networking.DestinationRule)
	return s
}

// Sidecar returns the spec if c is a Sidecar, else nil.
func (c *Config) Sidecar() *networking.Sidecar {
	s, _ := c.Spec.(*networking.Sidecar)
	return s
}

// Gateway returns the spec if c is a Gateway, else nil.
func (c *Config) Gateway() *networking.Gateway {
	s, _ := c.Spec.(*networking.Gateway)
	return s
}

// AuthorizationPolicy returns the spec if c is an AuthorizationPolicy,
// else nil.
func (c *Config) AuthorizationPolicy() *security.AuthorizationPolicy {
	s, _ := c.Spec.(*security.AuthorizationPolicy)
	return s
}

// PeerAuthentication returns the spec if c is a PeerAuthentication, else
// nil.
func (c *Config) PeerAuthentication() *security.PeerAuthentication {
	s, _ := c.Spec.(*security.PeerAuthentication)
	return s
}

// RequestAuthentication returns the spec if c is a RequestAuthentication,
// else nil.
func (c *Config) RequestAuthentication() *security.RequestAuthentication {
	s, _ := c.Spec.(*security.RequestAuthentication)
	return s
}
