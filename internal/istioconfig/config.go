// Package istioconfig loads the Istio config kinds Strait reads (the
// istio.io/api networking, security and telemetry types) from YAML into Configs, and
// keeps them in an immutable Store. A document passes, in order: the
// Kubernetes envelope (envelope.go), the spec's decoding with Istio's
// durations (duration.go) and protojson's errors located in the spec
// (fieldpath.go), the table of fields Strait honours or refuses (package
// support, printed into docs/istio-fields.md) and the validation Istio's
// admission webhook applies (package validate). The kinds themselves are
// in package schema, the field errors every step reports in package
// fielderr.
package istioconfig

import (
	"fmt"
	"maps"
	"time"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	telemetry "istio.io/api/telemetry/v1alpha1"

	"github.com/straitmesh/strait/internal/istioconfig/schema"
	"github.com/straitmesh/strait/internal/istioconfig/validate"
	"github.com/straitmesh/strait/internal/proxypush"
)

// The kinds Strait understands (package schema).
const (
	KindServiceEntry    = schema.ServiceEntry
	KindWorkloadEntry   = schema.WorkloadEntry
	KindVirtualService  = schema.VirtualService
	KindDestinationRule = schema.DestinationRule
	KindSidecar         = schema.Sidecar
	KindGateway         = schema.Gateway

	KindAuthorizationPolicy   = schema.AuthorizationPolicy
	KindPeerAuthentication    = schema.PeerAuthentication
	KindRequestAuthentication = schema.RequestAuthentication

	KindTelemetry = schema.Telemetry
)

// NetworkingGroup is the API group of the networking kinds.
const NetworkingGroup = schema.NetworkingGroup

// SecurityGroup is the API group of the security kinds.
const SecurityGroup = schema.SecurityGroup

// TelemetryGroup is the API group of Telemetry.
const TelemetryGroup = schema.TelemetryGroup

// GroupOf is the API group of a supported kind ("" for another kind).
func GroupOf(kind proxypush.Kind) string { return schema.GroupOf(kind) }

// DefaultNamespace is used when metadata.namespace is empty.
const DefaultNamespace = "default"

// Kinds lists the supported kinds in a fixed order (schema.Kinds).
var Kinds = schema.Kinds

// acceptedVersions are the versions we read, by API group.
var acceptedVersions = map[string]map[string]bool{
	NetworkingGroup: {"v1": true, "v1beta1": true, "v1alpha3": true},
	SecurityGroup:   {"v1": true, "v1beta1": true},
	TelemetryGroup:  {"v1": true, "v1alpha1": true},
}

// What the validation (package validate) defines that callers build on.
const (
	// DryRunAnnotation makes an AuthorizationPolicy evaluated and
	// reported but not enforced (validate.DryRunAnnotation).
	DryRunAnnotation = validate.DryRunAnnotation
	// MaxDirectResponseBody is the largest direct response body
	// (validate.MaxDirectResponseBody).
	MaxDirectResponseBody = validate.MaxDirectResponseBody
)

// ContainsPathTemplate reports whether an AuthorizationPolicy path uses
// Envoy's URI template operators (validate.ContainsPathTemplate).
func ContainsPathTemplate(path string) bool { return validate.ContainsPathTemplate(path) }

// GatewayProtocolIsTLS reports whether a Gateway server protocol
// terminates or passes TLS (validate.GatewayProtocolIsTLS).
func GatewayProtocolIsTLS(p string) bool { return validate.GatewayProtocolIsTLS(p) }

// GatewayProtocolIsHTTP reports whether a Gateway server protocol carries
// HTTP (validate.GatewayProtocolIsHTTP).
func GatewayProtocolIsHTTP(p string) bool { return validate.GatewayProtocolIsHTTP(p) }

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

// Telemetry returns the spec if c is a Telemetry, else nil.
func (c *Config) Telemetry() *telemetry.Telemetry {
	s, _ := c.Spec.(*telemetry.Telemetry)
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
