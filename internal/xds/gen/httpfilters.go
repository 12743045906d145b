package gen

// The fault and CORS HTTP filters and request mirroring, as Istio emits
// them (pilot/pkg/networking/core/route/route.go: TranslateFault,
// TranslateCORSPolicy, TranslateRequestMirrorPolicy; the filters' place in
// the HTTP connection manager: core/listener_builder.go).

import (
	"strconv"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	corsfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	faultfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	xdstype "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
)

const (
	faultFilterName = "envoy.filters.http.fault"
	corsFilterName  = "envoy.filters.http.cors"
)

// faultAndCORSFilters are the HTTP filters every HCM lists before the
// router, with empty configs: the routes' typed_per_filter_config needs
// them (Istio's xdsfilters.Fault and xdsfilters.Cors, in that order).
func faultAndCORSFilters() []*hcm.HttpFilter {
	return []*hcm.HttpFilter{
		{Name: faultFilterName, ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: mustAny(&faultfilter.HTTPFault{})}},
		{Name: corsFilterName, ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: mustAny(&corsfilter.Cors{})}},
	}
}

// routeFilterConfig is a rule's typed_per_filter_config: its fault and
// CORS policy; nil when it has neither.
func routeFilterConfig(rule *networking.HTTPRoute) map[string]*anypb.Any {
	var out map[string]*anypb.Any
	if f := translateFault(rule.Fault); f != nil {
		out = map[string]*anypb.Any{faultFilterName: mustAny(f)}
	}
	if c := translateCORS(rule.CorsPolicy); c != nil {
		if out == nil {
			out = map[string]*anypb.Any{}
		}
		out[corsFilterName] = mustAny(c)
	}
	return out
}

// percentFraction is a Percent (0 to 100, with fractions) in millionths.
func percentFraction(p *networking.Percent) *xdstype.FractionalPercent {
	return &xdstype.FractionalPercent{Numerator: uint32(p.GetValue() * 10000), Denominator: xdstype.FractionalPercent_MILLION}
}

func integerFraction(p int32) *xdstype.FractionalPercent {
	return &xdstype.FractionalPercent{Numerator: uint32(p), Denominator: xdstype.FractionalPercent_HUNDRED}
}

// translateFault is the HTTPFault of an HTTPFaultInjection; nil when it
// injects nothing.
func translateFault(in *networking.HTTPFaultInjection) *faultfilter.HTTPFault {
	if in == nil {
		return nil
	}
	out := &faultfilter.HTTPFault{}
	if d := in.Delay; d != nil {
		if fd := d.GetFixedDelay(); fd != nil {
			out.Delay = &faultcommon.FaultDelay{
				FaultDelaySecifier: &faultcommon.FaultDelay_FixedDelay{FixedDelay: fd},
				Percentage:         integerFraction(d.Percent), //nolint:staticcheck // Istio still reads the legacy percent
			}
			if d.Percentage != nil {
				out.Delay.Percentage = percentFraction(d.Percentage)
			}
		}
	}
	if a := in.Abort; a != nil {
		out.Abort = &faultfilter.FaultAbort{}
		if a.Percentage != nil {
			out.Abort.Percentage = percentFraction(a.Percentage)
		}
		switch e := a.ErrorType.(type) {
		case *networking.HTTPFaultInjection_Abort_HttpStatus:
			out.Abort.ErrorType = &faultfilter.FaultAbort_HttpStatus{HttpStatus: uint32(e.HttpStatus)}
		case *networking.HTTPFaultInjection_Abort_GrpcStatus:
			code, ok := grpcStatusCodes[strings.ToUpper(e.GrpcStatus)]
			if !ok {
				out.Abort = nil // config validation refuses unknown names
				break
			}
			out.Abort.ErrorType = &faultfilter.FaultAbort_GrpcStatus{GrpcStatus: code}
		default:
			out.Abort = nil
		}
	}
	if out.Delay == nil && out.Abort == nil {
		return nil
	}
	return out
}

// grpcStatusCodes are gRPC's status names and codes (Istio's
// pkg/util/grpc SupportedGRPCStatus).
var grpcStatusCodes = map[string]uint32{
	"OK": 0, "CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4,
	"NOT_FOUND": 5, "ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8,
	"FAILED_PRECONDITION": 9, "ABORTED": 10, "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12,
	"INTERNAL": 13, "UNAVAILABLE": 14, "DATA_LOSS": 15, "UNAUTHENTICATED": 16,
}

// translateCORS is the CorsPolicy of a VirtualService corsPolicy.
func translateCORS(in *networking.CorsPolicy) *corsfilter.CorsPolicy {
	if in == nil {
		return nil
	}
	out := &corsfilter.CorsPolicy{
		// Istio forwards preflights from origins it does not allow unless
		// unmatchedPreflights is IGNORE.
		ForwardNotMatchingPreflights: wrapperspb.Bool(in.UnmatchedPreflights != networking.CorsPolicy_IGNORE),
		FilterEnabled:                &core.RuntimeFractionalPercent{DefaultValue: integerFraction(100)},
		AllowCredentials:             in.AllowCredentials,
		AllowHeaders:                 strings.Join(in.AllowHeaders, ","),
		AllowMethods:                 strings.Join(in.AllowMethods, ","),
		ExposeHeaders:                strings.Join(in.ExposeHeaders, ","),
	}
	switch {
	case in.AllowOrigins != nil:
		for _, o := range in.AllowOrigins {
			if sm := stringMatcher(o); sm != nil {
				out.AllowOriginStringMatch = append(out.AllowOriginStringMatch, sm)
			}
		}
	case in.AllowOrigin != nil: //nolint:staticcheck // the deprecated exact list, as Istio still reads it
		for _, o := range in.AllowOrigin { //nolint:staticcheck
			out.AllowOriginStringMatch = append(out.AllowOriginStringMatch, &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: o}})
		}
	}
	if in.MaxAge != nil {
		out.MaxAge = strconv.FormatInt(in.MaxAge.GetSeconds(), 10)
	}
	return out
}

// mirrorPolicies are a rule's request_mirror_policies: mirror (with
// mirrorPercentage, or the legacy mirrorPercent; 100 % when neither) and
// each of mirrors. A percentage of 0 mirrors nothing.
func mirrorPolicies(snap *mesh.Snapshot, vs *istioconfig.Config, rule *networking.HTTPRoute, port uint32) []*route.RouteAction_RequestMirrorPolicy {
	var out []*route.RouteAction_RequestMirrorPolicy
	add := func(d *networking.Destination, frac *xdstype.FractionalPercent) {
		out = append(out, &route.RouteAction_RequestMirrorPolicy{
			Cluster:         destinationCluster(snap, vs.Namespace, d, port),
			RuntimeFraction: &core.RuntimeFractionalPercent{DefaultValue: frac},
			TraceSampled:    wrapperspb.Bool(false),
		})
	}
	if rule.Mirror != nil {
		switch {
		case rule.MirrorPercentage != nil:
			if rule.MirrorPercentage.GetValue() > 0 {
				add(rule.Mirror, percentFraction(rule.MirrorPercentage))
			}
		case rule.MirrorPercent != nil: //nolint:staticcheck // legacy field Istio still reads
			if v := rule.MirrorPercent.GetValue(); v > 0 { //nolint:staticcheck
				add(rule.Mirror, integerFraction(int32(v)))
			}
		default:
			add(rule.Mirror, integerFraction(100))
		}
	}
	for _, m := range rule.Mirrors {
		if m.GetDestination() == nil {
			continue
		}
		switch {
		case m.Percentage != nil:
			if m.Percentage.GetValue() > 0 {
				add(m.Destination, percentFraction(m.Percentage))
			}
		default:
			add(m.Destination, integerFraction(100))
		}
	}
	return out
}
