// Package schema names the Istio config kinds Strait reads: their kind
// names, API groups and spec messages (istio.io/api), as Istio's
// pkg/config/schema does for istiod. Package istioconfig loads documents
// of these kinds; its validate and support packages check their specs.
package schema

import (
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	telemetry "istio.io/api/telemetry/v1alpha1"

	"github.com/straitmesh/strait/internal/proxypush"
)

// The kinds Strait understands.
const (
	ServiceEntry    proxypush.Kind = "ServiceEntry"
	WorkloadEntry   proxypush.Kind = "WorkloadEntry"
	VirtualService  proxypush.Kind = "VirtualService"
	DestinationRule proxypush.Kind = "DestinationRule"
	Sidecar         proxypush.Kind = "Sidecar"
	Gateway         proxypush.Kind = "Gateway"

	AuthorizationPolicy   proxypush.Kind = "AuthorizationPolicy"
	PeerAuthentication    proxypush.Kind = "PeerAuthentication"
	RequestAuthentication proxypush.Kind = "RequestAuthentication"

	Telemetry proxypush.Kind = "Telemetry"
)

// NetworkingGroup is the API group of the networking kinds.
const NetworkingGroup = "networking.istio.io"

// SecurityGroup is the API group of the security kinds.
const SecurityGroup = "security.istio.io"

// TelemetryGroup is the API group of the Telemetry kind.
const TelemetryGroup = "telemetry.istio.io"

// GroupOf is the API group of a supported kind ("" for another kind).
func GroupOf(kind proxypush.Kind) string {
	switch kind {
	case AuthorizationPolicy, PeerAuthentication, RequestAuthentication:
		return SecurityGroup
	case ServiceEntry, WorkloadEntry, VirtualService, DestinationRule, Sidecar, Gateway:
		return NetworkingGroup
	case Telemetry:
		return TelemetryGroup
	}
	return ""
}

// Kinds lists the supported kinds in a fixed order. The slice is shared:
// callers must not modify it.
var Kinds = []proxypush.Kind{ServiceEntry, WorkloadEntry, VirtualService, DestinationRule, Sidecar,
	Gateway, AuthorizationPolicy, PeerAuthentication, RequestAuthentication, Telemetry}

// NewSpec returns an empty spec message for a supported kind, or nil.
func NewSpec(kind proxypush.Kind) proto.Message {
	switch kind {
	case ServiceEntry:
		return &networking.ServiceEntry{}
	case WorkloadEntry:
		return &networking.WorkloadEntry{}
	case VirtualService:
		return &networking.VirtualService{}
	case DestinationRule:
		return &networking.DestinationRule{}
	case Sidecar:
		return &networking.Sidecar{}
	case Gateway:
		return &networking.Gateway{}
	case AuthorizationPolicy:
		return &security.AuthorizationPolicy{}
	case PeerAuthentication:
		return &security.PeerAuthentication{}
	case RequestAuthentication:
		return &security.RequestAuthentication{}
	case Telemetry:
		return &telemetry.Telemetry{}
	}
	return nil
}
