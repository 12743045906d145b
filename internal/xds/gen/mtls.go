package gen

import (
	"fmt"
	"slices"
	"strings"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspector "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	rawbufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/mesh"
)

// Automatic mutual TLS between sidecars, as Istio's auto mTLS
// (pilot/pkg/networking/core/cluster_tls.go buildAutoMtlsSettings and the
// inbound filter chains of pilot/pkg/networking/core/listener_builder.go
// under PERMISSIVE): a workload has a sidecar with a mesh certificate when
// it carries Istio's label security.istio.io/tlsMode=istio (the injector
// sets it on pods; a WorkloadEntry sets it itself). Outbound clusters
// originate Istio mTLS to the endpoints that have it (and take mTLS on
// their port), plaintext to the others, chosen per endpoint by
// transport_socket_matches; a proxy whose own workload has it accepts
// Istio mTLS on its inbound ports beside plaintext.

const (
	// TLSModeLabel is Istio's endpoint label naming its TLS capability.
	TLSModeLabel = "security.istio.io/tlsMode"
	tlsModeIstio = "istio"

	// The SDS names strait-agent (and Istio's agent) serve, and the
	// bootstrap cluster that reaches them.
	sdsDefault = "default"
	sdsRootCA  = "ROOTCA"
	sdsCluster = "sds-grpc"

	tlsSocketName = "envoy.transport_sockets.tls"
)

// alpnInMesh is what a client sidecar offers (Istio's
// util.ALPNInMeshWithMxc); inboundMTLSALPN is what selects the inbound
// mTLS chain (Istio's mtlsTCPWithMxcALPNs and mtlsHTTPALPNs).
var (
	alpnInMesh      = []string{"istio-peer-exchange", "istio"}
	inboundMTLSALPN = []string{"istio-peer-exchange", "istio", "istio-http/1.0", "istio-http/1.1", "istio-h2"}
)

// sdsSecret is the SdsSecretConfig Istio generates for the agent's
// secrets (model.ConstructSdsSecretConfig).
func sdsSecret(name string) *tlsv3.SdsSecretConfig {
	return &tlsv3.SdsSecretConfig{
		Name: name,
		SdsConfig: &core.ConfigSource{
			ConfigSourceSpecifier: &core.ConfigSource_ApiConfigSource{ApiConfigSource: &core.ApiConfigSource{
				ApiType:                   core.ApiConfigSource_GRPC,
				SetNodeOnFirstMessageOnly: true,
				TransportApiVersion:       core.ApiVersion_V3,
				GrpcServices: []*core.GrpcService{{TargetSpecifier: &core.GrpcService_EnvoyGrpc_{
					EnvoyGrpc: &core.GrpcService_EnvoyGrpc{ClusterName: sdsCluster},
				}}},
			}},
			InitialFetchTimeout: durationpb.New(0),
			ResourceApiVersion:  core.ApiVersion_V3,
		},
	}
}

// meshCommonTLS is the CommonTlsContext of sidecar mTLS: the workload
// certificate, the mesh trust bundle, SAN matchers when given.
func meshCommonTLS(alpn []string, sans []*tlsv3.SubjectAltNameMatcher) *tlsv3.CommonTlsContext {
	return &tlsv3.CommonTlsContext{
		TlsParams: &tlsv3.TlsParameters{
			TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2,
			TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3,
		},
		AlpnProtocols:                  alpn,
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{sdsSecret(sdsDefault)},
		ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{
			CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: sans},
				ValidationContextSdsSecretConfig: sdsSecret(sdsRootCA),
			},
		},
	}
}

// hasSidecar reports whether an endpoint is a sidecar-proxied workload.
func hasSidecar(ep *mesh.Endpoint) bool { return ep.Labels[TLSModeLabel] == tlsModeIstio }

// endpointIdentity is the namespace and service account of an endpoint's
// workload (Istio's default service account "default" when the
// WorkloadEntry names none).
func endpointIdentity(snap *mesh.Snapshot, ep *mesh.Endpoint) (ns, sa string) {
	ns = ep.Workload.Namespace
	if w := snap.WorkloadByIP(ep.Address); w != nil && ep.Workload.Name != "" {
		ns, sa = w.Namespace, w.ServiceAccount
	}
	if sa == "" {
		sa = "default"
	}
	return ns, sa
}

// mtlsPeers returns the identities of the endpoints of svc that subset
// labels select and that take Istio mTLS on service port port
// (mtlsEndpoint): the peers an auto mTLS cluster may verify. The decision
// itself is per endpoint, as Istio's: the cluster carries
// transport_socket_matches and EDS marks the endpoints that take mTLS
// (endpointTLSMetadata).
func mtlsPeers(snap *mesh.Snapshot, svc *mesh.Service, port uint32, subset map[string]string) []string {
	var ids []string
	for _, ep := range svc.Endpoints {
		if !ep.Matches(subset) || !mtlsEndpoint(snap, ep, port) {
			continue
		}
		ns, sa := endpointIdentity(snap, ep)
		ids = append(ids, ns+"/"+sa)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// sidecarPeers returns the identities of the endpoints of svc that subset
// labels select when every one of them has a sidecar, nil otherwise: the
// SANs of a cluster whose DestinationRule says ISTIO_MUTUAL (one socket
// for every endpoint, so a peer without a sidecar leaves the identity
// unchecked beyond the mesh root).
func sidecarPeers(snap *mesh.Snapshot, svc *mesh.Service, subset map[string]string) []string {
	var ids []string
	for _, ep := range svc.Endpoints {
		if !ep.Matches(subset) {
			continue
		}
		if !hasSidecar(ep) || ep.Workload.Name == "" {
			return nil
		}
		ns, sa := endpointIdentity(snap, ep)
		ids = append(ids, ns+"/"+sa)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// mtlsEndpoint reports whether ep takes Istio mTLS on service port port:
// it is a workload with a sidecar and its PeerAuthentication (its
// workload's, else its namespace's, else the mesh's) does not make the
// port it serves plaintext only (Istio's mtlsChecker.checkMtlsEnabled in
// pilot/pkg/xds/endpoints). Port 0 looks at the sidecar only.
func mtlsEndpoint(snap *mesh.Snapshot, ep *mesh.Endpoint, port uint32) bool {
	if !hasSidecar(ep) || ep.Workload.Name == "" {
		return false
	}
	return port == 0 || !endpointMTLSDisabled(snap, ep, port)
}

// The transport socket match Istio's auto mTLS puts on a cluster and the
// endpoint metadata that selects it (pilot/pkg/networking/core
// cluster_tls.go applyUpstreamTLSSettings and the endpoint builder's
// tlsMode metadata).
const (
	transportSocketMatchKey = "envoy.transport_socket_match"
	tlsModeKey              = "tlsMode"
	tlsMatchIstio           = "tlsMode-istio"
	tlsMatchDisabled        = "tlsMode-disabled"
)

// endpointTLSMetadata is the metadata of an endpoint that takes Istio
// mTLS: filter_metadata["envoy.transport_socket_match"] = {tlsMode:
// istio}, which selects an auto mTLS cluster's tlsMode-istio socket.
func endpointTLSMetadata() *core.Metadata {
	return &core.Metadata{FilterMetadata: map[string]*structpb.Struct{
		transportSocketMatchKey: {Fields: map[string]*structpb.Value{tlsModeKey: structpb.NewStringValue(tlsModeIstio)}},
	}}
}

// endpointMTLSDisabled reports whether the endpoint's PeerAuthentication
// makes the port it serves for service port port plaintext only: its
// inbound then refuses TLS, so a client must not send mTLS there.
func endpointMTLSDisabled(snap *mesh.Snapshot, ep *mesh.Endpoint, port uint32) bool {
	target := ep.Ports[port]
	if target == 0 {
		target = port
	}
	return snap.PeerAuthentication(ep.Workload.Namespace, ep.Labels).ForPort(target) == mesh.MTLSDisable
}

// spiffeMatcher matches the SPIFFE ID of ns/sa in one trust domain of
// the mesh (its own or an alias), and no other: a certificate of the same
// root for another trust domain is not the workload (Istio's exact SAN match on the service
// accounts' SPIFFE IDs).
func spiffeMatcher(trustDomain, id string) *tlsv3.SubjectAltNameMatcher {
	ns, sa, _ := strings.Cut(id, "/")
	return &tlsv3.SubjectAltNameMatcher{
		SanType: tlsv3.SubjectAltNameMatcher_URI,
		Matcher: &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: "spiffe://" + trustDomain + "/ns/" + ns + "/sa/" + sa}},
	}
}

// applyAutoMTLS gives an outbound cluster Istio's mTLS transport socket:
// when the DestinationRule's tls (subset, port-level, top-level, in
// Istio's precedence) says ISTIO_MUTUAL, or, as the tlsMode-istio match
// beside a plaintext tlsMode-disabled one, when it says nothing and an
// endpoint the cluster reaches takes mTLS (auto mTLS); DISABLE keeps it
// plaintext; SIMPLE and MUTUAL originate TLS with the rule's own
// certificates (tlsorigination.go). The SNI is Istio's outbound_.PORT_.SUBSET_.HOST unless the
// rule names one; the SANs are the rule's subjectAltNames, else the
// endpoints' SPIFFE identities.
func applyAutoMTLS(snap *mesh.Snapshot, ns string, svc *mesh.Service, port uint32, subset string, c *cluster.Cluster) {
	var labels map[string]string
	if subset != "" {
		l, ok := snap.SubsetLabels(svc.Hostname, subset)
		if !ok {
			return
		}
		labels = l
	}
	ids := mtlsPeers(snap, svc, port, labels)
	// Auto mTLS needs a peer that takes it; a cluster none of whose
	// endpoints does stays plaintext (and needs no SANs).
	auto := len(ids) > 0
	if svc.Location != networking.ServiceEntry_MESH_INTERNAL {
		// A service outside the mesh (a ServiceEntry's location is
		// MESH_EXTERNAL unless it says otherwise) never gets auto mTLS,
		// whatever its endpoints' labels say (Istio's
		// buildUpstreamTLSSettings); a DestinationRule's ISTIO_MUTUAL
		// still applies.
		auto = false
	}
	if !snap.Mesh.EnableAutoMTLS {
		// The mesh config's enableAutoMtls false: only a DestinationRule's
		// tls makes a cluster TLS (Istio's buildUpstreamTLSSettings with
		// autoMTLSEnabled false).
		auto = false
	}
	if snap.NamespaceMTLSMode(svc.Namespace) == mesh.MTLSDisable {
		// The destination's namespace (or the mesh) takes no mTLS: Istio's
		// BestEffortInferServiceMTLSMode turns auto mTLS off. A workload
		// policy of the destination is not looked at, as in Istio.
		auto = false
	}
	settings := clientTLS(snap, ns, svc.Hostname, port, subset)
	switch settings.GetMode() {
	case networking.ClientTLSSettings_ISTIO_MUTUAL:
		ids = sidecarPeers(snap, svc, labels)
	case networking.ClientTLSSettings_SIMPLE, networking.ClientTLSSettings_MUTUAL:
		c.TransportSocket = originationSocket(settings, svc.Hostname, c) // tlsorigination.go
		return
	default: // DISABLE, or no tls at all
		if settings != nil || !auto {
			return
		}
	}
	var sans []*tlsv3.SubjectAltNameMatcher
	if names := settings.GetSubjectAltNames(); len(names) > 0 {
		for _, n := range names {
			sans = append(sans, &tlsv3.SubjectAltNameMatcher{SanType: sanType(n),
				Matcher: &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: n}}})
		}
	} else {
		// Istio's ExpandWithTrustDomains: the identity in the mesh's
		// trust domain and in each alias.
		for _, id := range ids {
			for _, td := range meshTrustDomains(snap) {
				sans = append(sans, spiffeMatcher(td, id))
			}
		}
	}
	sni := settings.GetSni()
	if sni == "" {
		sni = fmt.Sprintf("outbound_.%d_.%s_.%s", port, subset, svc.Hostname)
	}
	mtls := &core.TransportSocket{
		Name: tlsSocketName,
		ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: mustAny(&tlsv3.UpstreamTlsContext{
			CommonTlsContext: meshCommonTLS(alpnInMesh, sans),
			Sni:              sni,
		})},
	}
	if settings != nil {
		// The rule's own ISTIO_MUTUAL: every endpoint gets mTLS.
		c.TransportSocket = mtls
		return
	}
	// Auto mTLS: the endpoints EDS marks {tlsMode: istio} get mTLS, the
	// others (no sidecar, or a PeerAuthentication DISABLE on their port)
	// plaintext, as Istio's applyUpstreamTLSSettings for an autodetected
	// ISTIO_MUTUAL.
	c.TransportSocketMatches = []*cluster.Cluster_TransportSocketMatch{
		{
			Name:            tlsMatchIstio,
			Match:           &structpb.Struct{Fields: map[string]*structpb.Value{tlsModeKey: structpb.NewStringValue(tlsModeIstio)}},
			TransportSocket: mtls,
		},
		{
			Name:  tlsMatchDisabled,
			Match: &structpb.Struct{},
			TransportSocket: &core.TransportSocket{
				Name:       rawBufferSocketName,
				ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: mustAny(&rawbufferv3.RawBuffer{})},
			},
		},
	}
}

// sanType is URI for a SPIFFE ID or another URI, DNS otherwise.
func sanType(n string) tlsv3.SubjectAltNameMatcher_SanType {
	if strings.Contains(n, "://") {
		return tlsv3.SubjectAltNameMatcher_URI
	}
	return tlsv3.SubjectAltNameMatcher_DNS
}

// clientTLS is the DestinationRule tls that applies to a cluster, nil
// when none does: the subset's port-level settings, the subset's, the
// rule's port-level settings, then the rule's (Istio's
// MergeTrafficPolicy: a more specific tls replaces a less specific one).
func clientTLS(snap *mesh.Snapshot, ns, host string, port uint32, subset string) *networking.ClientTLSSettings {
	dr := snap.DestinationRuleFor(ns, host)
	if dr == nil {
		return nil
	}
	rule := dr.DestinationRule()
	fromPolicy := func(tp *networking.TrafficPolicy) *networking.ClientTLSSettings {
		for _, pl := range tp.GetPortLevelSettings() {
			if pl.GetPort().GetNumber() == port && pl.GetTls() != nil {
				return pl.GetTls()
			}
		}
		return tp.GetTls()
	}
	if subset != "" {
		for _, ss := range rule.GetSubsets() {
			if ss.GetName() == subset {
				if t := fromPolicy(ss.GetTrafficPolicy()); t != nil {
					return t
				}
			}
		}
	}
	return fromPolicy(rule.GetTrafficPolicy())
}

// autoMTLSKey fingerprints what applyAutoMTLS decides for svc's clusters,
// so that the cluster cache rebuilds them when only endpoints changed but
// the decision did.
func autoMTLSKey(snap *mesh.Snapshot, ns string, svc *mesh.Service) string {
	var b strings.Builder
	fmt.Fprint(&b, snap.NamespaceMTLSMode(svc.Namespace))
	for _, p := range svc.Ports {
		fmt.Fprint(&b, "|", p.Number, mtlsPeers(snap, svc, p.Number, nil), sidecarPeers(snap, svc, nil))
		if !UsesEDS(svc) {
			// A DNS cluster carries its endpoints and their metadata.
			fmt.Fprint(&b, endpointMTLSKey(snap, svc, p.Number))
		}
		for _, ss := range snap.SubsetsFor(ns, svc.Hostname) {
			fmt.Fprint(&b, "|", ss.GetName(), mtlsPeers(snap, svc, p.Number, ss.GetLabels()), sidecarPeers(snap, svc, ss.GetLabels()))
		}
	}
	return b.String()
}

// endpointMTLSKey fingerprints which endpoints of svc take mTLS on port
// (mtlsEndpoint), one bit each: what a load assignment depends on besides
// the service.
func endpointMTLSKey(snap *mesh.Snapshot, svc *mesh.Service, port uint32) string {
	b := make([]byte, len(svc.Endpoints))
	for i, ep := range svc.Endpoints {
		b[i] = '0'
		if mtlsEndpoint(snap, ep, port) {
			b[i] = '1'
		}
	}
	return string(b)
}

// tlsInspector is the listener filter that lets chains match on TLS and
// ALPN.
func tlsInspector() *listener.ListenerFilter {
	return &listener.ListenerFilter{
		Name:       tlsInspectorFilterName,
		ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: mustAny(&tlsinspector.TlsInspector{})},
	}
}
