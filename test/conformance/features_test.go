package conformance

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// The knobs of `make gateway-conformance` (environment variables):
const (
	// envRunTest runs one test of the suite by its short name (the
	// suite's RunTest), e.g. HTTPRouteSimpleSameNamespace.
	envRunTest = "STRAIT_CONFORMANCE_RUN_TEST"
	// envProfiles are the conformance profiles, comma-separated (default
	// GATEWAY-HTTP,GATEWAY-GRPC).
	envProfiles = "STRAIT_CONFORMANCE_PROFILES"
	// envSkip adds tests to skip, comma-separated short names.
	envSkip = "STRAIT_CONFORMANCE_SKIP"
)

// claimed are the features Strait claims beyond the profiles' core ones
// (Gateway, HTTPRoute, ReferenceGrant, GRPCRoute): what docs/gateway-api.md
// lists as honoured.
var claimed = []features.FeatureName{
	features.SupportGRPCRoute,
	features.SupportGatewayPort8080,
	features.SupportGatewayHTTPListenerIsolation,
	features.SupportHTTPRouteQueryParamMatching,
	features.SupportHTTPRouteMethodMatching,
	features.SupportHTTPRouteResponseHeaderModification,
	features.SupportHTTPRouteBackendRequestHeaderModification,
	features.SupportHTTPRoutePortRedirect,
	features.SupportHTTPRouteSchemeRedirect,
	features.SupportHTTPRoutePathRedirect,
	features.SupportHTTPRouteHostRewrite,
	features.SupportHTTPRoutePathRewrite,
	features.SupportHTTPRouteRequestMirror,
	features.SupportHTTPRouteRequestMultipleMirrors,
	features.SupportHTTPRouteRequestPercentageMirror,
	features.SupportHTTPRouteRequestTimeout,
	features.SupportHTTPRouteBackendTimeout,
	features.SupportHTTPRouteParentRefPort,
	features.SupportHTTPRouteDestinationPortMatching,
	features.SupportHTTPRoute303RedirectStatusCode,
	features.SupportHTTPRoute307RedirectStatusCode,
	features.SupportHTTPRoute308RedirectStatusCode,
	features.SupportHTTPRouteNamedRouteRule,
	features.SupportHTTPRouteBackendProtocolH2C,
	features.SupportHTTPRouteBackendProtocolWebSocket,
	features.SupportHTTPRouteRetry,
	features.SupportGRPCRouteNamedRouteRule,
}

// unclaimed says why Strait does not claim a feature of the profiles run
// here; a test that needs one is skipped by the suite with this reason.
var unclaimed = map[features.FeatureName]string{
	features.SupportGatewayStaticAddresses:                                     "spec.addresses is refused (UnsupportedAddress): straitd deploys the gateway's Service itself",
	features.SupportGatewayAddressEmpty:                                        "spec.addresses is refused (UnsupportedAddress)",
	features.SupportGatewayInfrastructure:                                      "spec.infrastructure is refused",
	features.SupportGatewayFrontendClientCertificateValidation:                 "spec.tls (frontend validation) is refused",
	features.SupportGatewayFrontendClientCertificateValidationInsecureFallback: "spec.tls (frontend validation) is refused",
	features.SupportGatewayBackendClientCertificate:                            "spec.tls (the backend client certificate) is refused",
	features.SupportGatewayHTTPSListenerDetectMisdirectedRequests:              "not claimed: a 421 for a request whose Host is another HTTPS listener's than its SNI's is not implemented",
	features.SupportListenerSet:                                                "ListenerSet is not implemented",
	features.SupportHTTPRouteCORS:                                              "the CORS filter is refused",
	features.SupportHTTPRouteRetryBackendTimeout:                               "not claimed: retry with a backendRequest timeout per try is not checked against the suite",
	features.SupportHTTPRouteRetryConnectionError:                              "not claimed: retry on connection errors is not checked against the suite",
	features.SupportBackendTLSPolicy:                                           "BackendTLSPolicy is not implemented",
	features.SupportBackendTLSPolicySANValidation:                              "BackendTLSPolicy is not implemented",
	features.SupportMesh:                                                       meshNotRun,
	features.SupportMeshClusterIPMatching:                                      "a sidecar routes an HTTP request by its Host within the port's route table (as Istio's sidecars do), not by the Service IP it was sent to: a request to one Service's IP with another's Host gets the other's routes",
}

// meshNotRun is why the mesh features are not claimed in a run without a
// MESH profile.
const meshNotRun = "claimed only when a MESH profile runs (" + envProfiles + "=MESH-HTTP): its backend, Istio's echo, is built then"

// meshClaimed are the features Strait claims when a MESH profile runs:
// HTTPRoutes and GRPCRoutes with a Service parent (GAMMA) apply to the
// sidecars of the mesh.
var meshClaimed = []features.FeatureName{
	features.SupportMesh,
	features.SupportMeshConsumerRoute,
	features.SupportMeshHTTPRouteRewritePath,
	features.SupportMeshHTTPRouteSchemeRedirect,
	features.SupportMeshHTTPRouteRedirectPort,
	features.SupportMeshHTTPRouteRedirectPath,
	features.SupportMeshHTTPRouteBackendRequestHeaderModification,
	features.SupportMeshHTTPRouteQueryParamMatching,
	features.SupportMeshHTTPRouteNamedRouteRule,
}

// skippedTests are tests of claimed features that the harness skips, with
// the reason.
var skippedTests = map[string]string{}

// supportedFeatures is claimed as a set, with the mesh's when a MESH
// profile runs.
func supportedFeatures(mesh bool) []features.FeatureName {
	s := sets.New(claimed...)
	if mesh {
		s.Insert(meshClaimed...)
	}
	return sets.List(s)
}

// hasMesh says whether profiles include a MESH profile.
func hasMesh(profiles []suite.ConformanceProfileName) bool {
	return slices.ContainsFunc(profiles, func(p suite.ConformanceProfileName) bool {
		return strings.HasPrefix(string(p), "MESH-")
	})
}

// parseProfiles reads STRAIT_CONFORMANCE_PROFILES.
func parseProfiles(v string) ([]suite.ConformanceProfileName, error) {
	if v == "" {
		v = "GATEWAY-HTTP,GATEWAY-GRPC"
	}
	known := []suite.ConformanceProfileName{
		suite.GatewayHTTPConformanceProfileName, suite.GatewayGRPCConformanceProfileName,
		suite.GatewayTLSConformanceProfileName, suite.GatewayTCPConformanceProfileName,
		suite.MeshHTTPConformanceProfileName, suite.MeshGRPCConformanceProfileName,
	}
	var out []suite.ConformanceProfileName
	for _, p := range strings.Split(v, ",") {
		name := suite.ConformanceProfileName(strings.TrimSpace(p))
		if !slices.Contains(known, name) {
			return nil, fmt.Errorf("%s: unknown profile %q (one of %v)", envProfiles, name, known)
		}
		out = append(out, name)
	}
	return out, nil
}
