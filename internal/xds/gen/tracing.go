package gen

import (
	"net"
	"strconv"
	"strings"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tracecfg "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	uuid "github.com/envoyproxy/go-control-plane/envoy/extensions/request_id/uuid/v3"
	tracingtype "github.com/envoyproxy/go-control-plane/envoy/type/tracing/v3"
	xdstype "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/meshconfig"
)

// ZipkinCluster is the cluster of the legacy Zipkin address
// (defaultConfig.tracing.zipkin.address): Istio puts it in the sidecar's
// bootstrap under this name; straitd sends it in CDS.
const ZipkinCluster = "zipkin"

// Envoy's tracer names.
const (
	zipkinTracerName = "envoy.tracers.zipkin"
	otelTracerName   = "envoy.tracers.opentelemetry"
)

// withTracing sets the tracing of tp (telemetryapi.go) on every HTTP
// connection manager of ls, by each listener's mode, or, when no Telemetry
// sets tracing, the mesh's (meshconfig.Tracing), with the UUID request id
// extension, as istiod's configureTracing does for sidecar listeners; it
// returns ls. With no tracing, or a provider whose service the registry
// does not know (istiod then logs and writes none), nothing changes.
func withTracing(snap *mesh.Snapshot, tp *telemetryPolicy, ls ...*listener.Listener) []*listener.Listener {
	var byMode [2]*hcm.HttpConnectionManager_Tracing
	if tp == nil || tp.tracing == nil {
		t := meshTracing(snap, snap.Mesh.Tracing)
		byMode = [2]*hcm.HttpConnectionManager_Tracing{t, t}
	} else {
		for m := range byMode {
			byMode[m] = meshTracing(snap, meshTracingOf(snap.Mesh, tp.tracing[m]))
		}
	}
	if byMode[clientMode] == nil && byMode[serverMode] == nil {
		return ls
	}
	done := map[*listener.Filter]bool{}
	for _, l := range ls {
		t := byMode[listenerMode(l)]
		if t == nil {
			continue
		}
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				if done[f] || f.GetName() != hcmFilterName {
					continue
				}
				done[f] = true
				h := &hcm.HttpConnectionManager{}
				if f.GetTypedConfig().UnmarshalTo(h) != nil {
					continue
				}
				h.Tracing = t
				h.RequestIdExtension = uuidRequestID()
				f.ConfigType = &listener.Filter_TypedConfig{TypedConfig: mustAny(h)}
			}
		}
	}
	return ls
}

// uuidRequestID is istiod's UUIDRequestIDExtension: the request id
// decides trace sampling, so every hop of a request decides alike.
func uuidRequestID() *hcm.RequestIDExtension {
	return &hcm.RequestIDExtension{TypedConfig: mustAny(&uuid.UuidRequestIdConfig{
		UseRequestIdForTraceSampling: wrapperspb.Bool(true),
	})}
}

// meshTracing is the HCM tracing of mt (nil: none): the mesh config's
// or a Telemetry's.
func meshTracing(snap *mesh.Snapshot, mt *meshconfig.Tracing) *hcm.HttpConnectionManager_Tracing {
	if mt == nil {
		return nil
	}
	p := mt.Provider
	out := &hcm.HttpConnectionManager_Tracing{
		// istiod's configureSampling.
		ClientSampling:  &xdstype.Percent{Value: 100},
		RandomSampling:  &xdstype.Percent{Value: mt.Sampling},
		OverallSampling: &xdstype.Percent{Value: 100},
	}
	if mt.MaxPathTagLength != 0 {
		out.MaxPathTagLength = wrapperspb.UInt32(mt.MaxPathTagLength)
	}
	for _, ct := range mt.CustomTags {
		out.CustomTags = append(out.CustomTags, customTag(ct))
	}
	host, clusterName := p.Address, ZipkinCluster
	if p.Address == "" {
		var ok bool
		if host, clusterName, ok = providerCluster(snap, p.Service, p.Port); !ok {
			return nil
		}
	}
	switch p.Kind {
	case meshconfig.TracingZipkin:
		zc := &tracecfg.ZipkinConfig{
			CollectorCluster:         clusterName,
			CollectorEndpoint:        p.Path,
			CollectorHostname:        host,
			CollectorEndpointVersion: tracecfg.ZipkinConfig_HTTP_JSON,
			TraceId_128Bit:           p.TraceID128,
			SharedSpanContext:        wrapperspb.Bool(false),
		}
		if p.W3C {
			zc.TraceContextOption = tracecfg.ZipkinConfig_USE_B3_WITH_W3C_PROPAGATION
		}
		out.Provider = &tracecfg.Tracing_Http{Name: zipkinTracerName, ConfigType: &tracecfg.Tracing_Http_TypedConfig{TypedConfig: mustAny(zc)}}
	case meshconfig.TracingOpenTelemetry:
		// service_name is left empty: istiod writes the proxy's node
		// cluster, which strait-proxy takes when it is empty, so that
		// the listeners stay shared by the proxies of a scope.
		gs := &core.GrpcService{TargetSpecifier: &core.GrpcService_EnvoyGrpc_{EnvoyGrpc: &core.GrpcService_EnvoyGrpc{ClusterName: clusterName, Authority: host}}}
		if p.Timeout > 0 {
			gs.Timeout = durationpb.New(p.Timeout)
		}
		if p.Header != "" {
			gs.InitialMetadata = []*core.HeaderValue{{Key: p.Header, Value: p.HeaderValue}}
		}
		out.Provider = &tracecfg.Tracing_Http{Name: otelTracerName, ConfigType: &tracecfg.Tracing_Http_TypedConfig{TypedConfig: mustAny(&tracecfg.OpenTelemetryConfig{GrpcService: gs})}}
	default:
		return nil
	}
	return out
}

// customTag is a defaultConfig.tracing custom tag as istiod's
// buildCustomTagsFromProxyConfig writes it.
func customTag(ct meshconfig.TracingTag) *tracingtype.CustomTag {
	out := &tracingtype.CustomTag{Tag: ct.Tag}
	switch {
	case ct.IsEnv:
		out.Type = &tracingtype.CustomTag_Environment_{Environment: &tracingtype.CustomTag_Environment{Name: ct.Environment, DefaultValue: ct.Default}}
	case ct.IsHeader:
		out.Type = &tracingtype.CustomTag_RequestHeader{RequestHeader: &tracingtype.CustomTag_Header{Name: ct.Header, DefaultValue: ct.Default}}
	default:
		out.Type = &tracingtype.CustomTag_Literal_{Literal: &tracingtype.CustomTag_Literal{Value: ct.Literal}}
	}
	return out
}

// providerCluster is istiod's LookupCluster: an extension provider's
// service ("host" or "namespace/host") and port name a registry service,
// whose outbound cluster takes the spans.
func providerCluster(snap *mesh.Snapshot, service string, port uint32) (host, clusterName string, ok bool) {
	ns, name, scoped := strings.Cut(service, "/")
	if !scoped {
		name = service
	}
	svc := snap.Service(name)
	if svc == nil || (scoped && svc.Namespace != ns) {
		return "", "", false
	}
	return svc.Hostname, OutboundClusterName(port, "", svc.Hostname), true
}

// tracingClusters is the legacy Zipkin address's cluster (none without
// it): STRICT_DNS on the address, as Istio's bootstrap declares it.
func tracingClusters(snap *mesh.Snapshot) []*cluster.Cluster {
	mt := snap.Mesh.Tracing
	if mt == nil || mt.Provider.Address == "" {
		return nil
	}
	host, portStr, err := net.SplitHostPort(mt.Provider.Address)
	port, perr := strconv.ParseUint(portStr, 10, 16)
	if err != nil || perr != nil {
		return nil // meshconfig's parseTracing refuses such an address
	}
	return []*cluster.Cluster{{
		Name:                 ZipkinCluster,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_STRICT_DNS},
		ConnectTimeout:       durationpb.New(snap.Mesh.ConnectTimeout),
		LbPolicy:             cluster.Cluster_ROUND_ROBIN,
		DnsLookupFamily:      cluster.Cluster_V4_ONLY,
		DnsRefreshRate:       durationpb.New(snap.Mesh.DNSRefreshRate),
		RespectDnsTtl:        true,
		LoadAssignment: &endpoint.ClusterLoadAssignment{
			ClusterName: ZipkinCluster,
			Endpoints: []*endpoint.LocalityLbEndpoints{{LbEndpoints: []*endpoint.LbEndpoint{{
				HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{Address: socketAddress(host, uint32(port))}},
			}}}},
		},
	}}
}
