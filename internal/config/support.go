package config

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/straitmesh/strait/internal/model"
)

// Support is whether Strait honours a config field end to end (straitd
// generates the Envoy config Istio generates for it, and strait-proxy
// implements that config), or refuses a document that sets it.
type Support int

const (
	// Refused: a document that sets the field is refused with
	// "FIELD: not supported by Strait yet".
	Refused Support = iota
	// Honoured: the field works as in Istio.
	Honoured
)

func (s Support) String() string {
	if s == Honoured {
		return "honoured"
	}
	return "refused"
}

// notSupported is the problem of a refused field.
const notSupported = "not supported by Strait yet"

// ErrNotSupported is wrapped by the *FieldError of a field Strait refuses,
// so that a caller can tell a refused document from an invalid one
// (errors.Is(err, ErrNotSupported)).
var ErrNotSupported = errNotSupported{}

type errNotSupported struct{}

func (errNotSupported) Error() string { return notSupported }

// fieldSupport is the honour-or-refuse registry: for every kind Strait
// loads, the state of every field path of its istio.io/api message tree.
// A path joins JSON field names with "." (elements of a list or values of a
// map collapse: "http.match.headers.exact"); an enum field also has one
// entry per non-zero value ("resolution=DNS"), checked when the field is
// honoured (a zero value cannot be told from an unset field). TestFieldSupportComplete fails when a field of the istio.io/api
// types is missing here, or an entry names no field; docs/istio-fields.md
// is generated from this table (go run ./hack/istiofields).
//
// To honour a field, flip its line to Honoured, in the commit that makes it
// work end to end.
var fieldSupport = map[model.Kind]map[string]Support{
	KindRequestAuthentication: requestAuthenticationSupport, // support_jwt.go
	KindVirtualService: {
		"hosts":                                       Honoured,
		"gateways":                                    Honoured,
		"http":                                        Honoured,
		"http.name":                                   Honoured,
		"http.match":                                  Honoured,
		"http.match.name":                             Honoured,
		"http.match.uri":                              Honoured,
		"http.match.uri.exact":                        Honoured,
		"http.match.uri.prefix":                       Honoured,
		"http.match.uri.regex":                        Honoured,
		"http.match.scheme":                           Honoured,
		"http.match.scheme.exact":                     Honoured,
		"http.match.scheme.prefix":                    Honoured,
		"http.match.scheme.regex":                     Honoured,
		"http.match.method":                           Honoured,
		"http.match.method.exact":                     Honoured,
		"http.match.method.prefix":                    Honoured,
		"http.match.method.regex":                     Honoured,
		"http.match.authority":                        Honoured,
		"http.match.authority.exact":                  Honoured,
		"http.match.authority.prefix":                 Honoured,
		"http.match.authority.regex":                  Honoured,
		"http.match.headers":                          Honoured,
		"http.match.headers.exact":                    Honoured,
		"http.match.headers.prefix":                   Honoured,
		"http.match.headers.regex":                    Honoured,
		"http.match.port":                             Honoured,
		"http.match.sourceLabels":                     Honoured,
		"http.match.gateways":                         Honoured,
		"http.match.queryParams":                      Honoured,
		"http.match.queryParams.exact":                Honoured,
		"http.match.queryParams.prefix":               Honoured,
		"http.match.queryParams.regex":                Honoured,
		"http.match.ignoreUriCase":                    Honoured,
		"http.match.withoutHeaders":                   Honoured,
		"http.match.withoutHeaders.exact":             Honoured,
		"http.match.withoutHeaders.prefix":            Honoured,
		"http.match.withoutHeaders.regex":             Honoured,
		"http.match.sourceNamespace":                  Honoured,
		"http.match.statPrefix":                       Refused,
		"http.route":                                  Honoured,
		"http.route.destination":                      Honoured,
		"http.route.destination.host":                 Honoured,
		"http.route.destination.subset":               Honoured,
		"http.route.destination.port":                 Honoured,
		"http.route.destination.port.number":          Honoured,
		"http.route.weight":                           Honoured,
		"http.route.headers":                          Honoured,
		"http.route.headers.request":                  Honoured,
		"http.route.headers.request.set":              Honoured,
		"http.route.headers.request.add":              Honoured,
		"http.route.headers.request.remove":           Honoured,
		"http.route.headers.response":                 Honoured,
		"http.route.headers.response.set":             Honoured,
		"http.route.headers.response.add":             Honoured,
		"http.route.headers.response.remove":          Honoured,
		"http.redirect":                               Honoured,
		"http.redirect.uri":                           Honoured,
		"http.redirect.authority":                     Honoured,
		"http.redirect.port":                          Honoured,
		"http.redirect.derivePort":                    Honoured,
		"http.redirect.derivePort=FROM_REQUEST_PORT":  Honoured,
		"http.redirect.scheme":                        Honoured,
		"http.redirect.redirectCode":                  Honoured,
		"http.redirect.prefixRewrite":                 Honoured,
		"http.directResponse":                         Honoured,
		"http.directResponse.status":                  Honoured,
		"http.directResponse.body":                    Honoured,
		"http.directResponse.body.string":             Honoured,
		"http.directResponse.body.bytes":              Honoured,
		"http.delegate":                               Honoured,
		"http.delegate.name":                          Honoured,
		"http.delegate.namespace":                     Honoured,
		"http.rewrite":                                Honoured,
		"http.rewrite.uri":                            Honoured,
		"http.rewrite.authority":                      Honoured,
		"http.rewrite.uriRegexRewrite":                Honoured,
		"http.rewrite.uriRegexRewrite.match":          Honoured,
		"http.rewrite.uriRegexRewrite.rewrite":        Honoured,
		"http.timeout":                                Honoured,
		"http.retries":                                Honoured,
		"http.retries.attempts":                       Honoured,
		"http.retries.perTryTimeout":                  Honoured,
		"http.retries.retryOn":                        Honoured,
		"http.retries.retryRemoteLocalities":          Honoured,
		"http.retries.retryIgnorePreviousHosts":       Honoured,
		"http.retries.backoff":                        Honoured,
		"http.fault":                                  Honoured,
		"http.fault.delay":                            Honoured,
		"http.fault.delay.percent":                    Honoured,
		"http.fault.delay.fixedDelay":                 Honoured,
		"http.fault.delay.exponentialDelay":           Refused,
		"http.fault.delay.percentage":                 Honoured,
		"http.fault.delay.percentage.value":           Honoured,
		"http.fault.abort":                            Honoured,
		"http.fault.abort.httpStatus":                 Honoured,
		"http.fault.abort.grpcStatus":                 Honoured,
		"http.fault.abort.http2Error":                 Refused,
		"http.fault.abort.percentage":                 Honoured,
		"http.fault.abort.percentage.value":           Honoured,
		"http.mirror":                                 Honoured,
		"http.mirror.host":                            Honoured,
		"http.mirror.subset":                          Honoured,
		"http.mirror.port":                            Honoured,
		"http.mirror.port.number":                     Honoured,
		"http.mirrors":                                Honoured,
		"http.mirrors.destination":                    Honoured,
		"http.mirrors.destination.host":               Honoured,
		"http.mirrors.destination.subset":             Honoured,
		"http.mirrors.destination.port":               Honoured,
		"http.mirrors.destination.port.number":        Honoured,
		"http.mirrors.percentage":                     Honoured,
		"http.mirrors.percentage.value":               Honoured,
		"http.mirrorPercent":                          Honoured,
		"http.mirrorPercentage":                       Honoured,
		"http.mirrorPercentage.value":                 Honoured,
		"http.corsPolicy":                             Honoured,
		"http.corsPolicy.allowOrigin":                 Honoured,
		"http.corsPolicy.allowOrigins":                Honoured,
		"http.corsPolicy.allowOrigins.exact":          Honoured,
		"http.corsPolicy.allowOrigins.prefix":         Honoured,
		"http.corsPolicy.allowOrigins.regex":          Honoured,
		"http.corsPolicy.allowMethods":                Honoured,
		"http.corsPolicy.allowHeaders":                Honoured,
		"http.corsPolicy.exposeHeaders":               Honoured,
		"http.corsPolicy.maxAge":                      Honoured,
		"http.corsPolicy.allowCredentials":            Honoured,
		"http.corsPolicy.unmatchedPreflights":         Honoured,
		"http.corsPolicy.unmatchedPreflights=FORWARD": Honoured,
		"http.corsPolicy.unmatchedPreflights=IGNORE":  Honoured,
		"http.headers":                                Honoured,
		"http.headers.request":                        Honoured,
		"http.headers.request.set":                    Honoured,
		"http.headers.request.add":                    Honoured,
		"http.headers.request.remove":                 Honoured,
		"http.headers.response":                       Honoured,
		"http.headers.response.set":                   Honoured,
		"http.headers.response.add":                   Honoured,
		"http.headers.response.remove":                Honoured,
		"tls":                                         Honoured,
		"tls.match":                                   Honoured,
		"tls.match.sniHosts":                          Honoured,
		"tls.match.destinationSubnets":                Honoured,
		"tls.match.port":                              Honoured,
		"tls.match.sourceLabels":                      Honoured,
		"tls.match.gateways":                          Honoured,
		"tls.match.sourceNamespace":                   Honoured,
		"tls.route":                                   Honoured,
		"tls.route.destination":                       Honoured,
		"tls.route.destination.host":                  Honoured,
		"tls.route.destination.subset":                Honoured,
		"tls.route.destination.port":                  Honoured,
		"tls.route.destination.port.number":           Honoured,
		"tls.route.weight":                            Honoured,
		"tcp":                                         Honoured,
		"tcp.match":                                   Honoured,
		"tcp.match.destinationSubnets":                Honoured,
		"tcp.match.port":                              Honoured,
		"tcp.match.sourceSubnet":                      Honoured,
		"tcp.match.sourceLabels":                      Honoured,
		"tcp.match.gateways":                          Honoured,
		"tcp.match.sourceNamespace":                   Honoured,
		"tcp.route":                                   Honoured,
		"tcp.route.destination":                       Honoured,
		"tcp.route.destination.host":                  Honoured,
		"tcp.route.destination.subset":                Honoured,
		"tcp.route.destination.port":                  Honoured,
		"tcp.route.destination.port.number":           Honoured,
		"tcp.route.weight":                            Honoured,
		"exportTo":                                    Honoured,
	},
	KindDestinationRule: {
		"host":                              Honoured,
		"trafficPolicy":                     Honoured,
		"trafficPolicy.loadBalancer":        Honoured,
		"trafficPolicy.loadBalancer.simple": Honoured,
		"trafficPolicy.loadBalancer.simple=LEAST_CONN":                                     Honoured,
		"trafficPolicy.loadBalancer.simple=RANDOM":                                         Honoured,
		"trafficPolicy.loadBalancer.simple=PASSTHROUGH":                                    Honoured,
		"trafficPolicy.loadBalancer.simple=ROUND_ROBIN":                                    Honoured,
		"trafficPolicy.loadBalancer.simple=LEAST_REQUEST":                                  Honoured,
		"trafficPolicy.loadBalancer.consistentHash":                                        Honoured,
		"trafficPolicy.loadBalancer.consistentHash.httpHeaderName":                         Honoured,
		"trafficPolicy.loadBalancer.consistentHash.httpCookie":                             Honoured,
		"trafficPolicy.loadBalancer.consistentHash.httpCookie.name":                        Honoured,
		"trafficPolicy.loadBalancer.consistentHash.httpCookie.path":                        Honoured,
		"trafficPolicy.loadBalancer.consistentHash.httpCookie.ttl":                         Honoured,
		"trafficPolicy.loadBalancer.consistentHash.httpCookie.attributes":                  Honoured,
		"trafficPolicy.loadBalancer.consistentHash.httpCookie.attributes.name":             Honoured,
		"trafficPolicy.loadBalancer.consistentHash.httpCookie.attributes.value":            Honoured,
		"trafficPolicy.loadBalancer.consistentHash.useSourceIp":                            Honoured,
		"trafficPolicy.loadBalancer.consistentHash.httpQueryParameterName":                 Honoured,
		"trafficPolicy.loadBalancer.consistentHash.ringHash":                               Honoured,
		"trafficPolicy.loadBalancer.consistentHash.ringHash.minimumRingSize":               Honoured,
		"trafficPolicy.loadBalancer.consistentHash.maglev":                                 Honoured,
		"trafficPolicy.loadBalancer.consistentHash.maglev.tableSize":                       Honoured,
		"trafficPolicy.loadBalancer.consistentHash.minimumRingSize":                        Honoured,
		"trafficPolicy.loadBalancer.backendUtilization":                                    Refused,
		"trafficPolicy.loadBalancer.backendUtilization.weightStabilizationPeriod":          Refused,
		"trafficPolicy.loadBalancer.backendUtilization.weightExpirationPeriod":             Refused,
		"trafficPolicy.loadBalancer.backendUtilization.weightUpdatePeriod":                 Refused,
		"trafficPolicy.loadBalancer.backendUtilization.errorUtilizationPenaltyPercent":     Refused,
		"trafficPolicy.loadBalancer.backendUtilization.metricNamesForComputingUtilization": Refused,
		"trafficPolicy.loadBalancer.localityLbSetting":                                     Honoured,
		"trafficPolicy.loadBalancer.localityLbSetting.distribute":                          Honoured,
		"trafficPolicy.loadBalancer.localityLbSetting.distribute.from":                     Honoured,
		"trafficPolicy.loadBalancer.localityLbSetting.distribute.to":                       Honoured,
		"trafficPolicy.loadBalancer.localityLbSetting.failover":                            Honoured,
		"trafficPolicy.loadBalancer.localityLbSetting.failover.from":                       Honoured,
		"trafficPolicy.loadBalancer.localityLbSetting.failover.to":                         Honoured,
		"trafficPolicy.loadBalancer.localityLbSetting.failoverPriority":                    Honoured,
		"trafficPolicy.loadBalancer.localityLbSetting.enabled":                             Honoured,
		"trafficPolicy.loadBalancer.zoneAwareLbSetting":                                    Refused,
		"trafficPolicy.loadBalancer.zoneAwareLbSetting.enabled":                            Refused,
		"trafficPolicy.loadBalancer.zoneAwareLbSetting.failover":                           Refused,
		"trafficPolicy.loadBalancer.zoneAwareLbSetting.failover.from":                      Refused,
		"trafficPolicy.loadBalancer.zoneAwareLbSetting.failover.to":                        Refused,
		"trafficPolicy.loadBalancer.zoneAwareLbSetting.failoverPriority":                   Refused,
		"trafficPolicy.loadBalancer.zoneAwareLbSetting.minClusterSize":                     Refused,
		"trafficPolicy.loadBalancer.warmupDurationSecs":                                    Honoured,
		"trafficPolicy.loadBalancer.warmup":                                                Honoured,
		"trafficPolicy.loadBalancer.warmup.duration":                                       Honoured,
		"trafficPolicy.loadBalancer.warmup.minimumPercent":                                 Honoured,
		"trafficPolicy.loadBalancer.warmup.aggression":                                     Honoured,
		"trafficPolicy.connectionPool":                                                     Honoured,
		"trafficPolicy.connectionPool.tcp":                                                 Honoured,
		"trafficPolicy.connectionPool.tcp.maxConnections":                                  Honoured,
		"trafficPolicy.connectionPool.tcp.connectTimeout":                                  Honoured,
		"trafficPolicy.connectionPool.tcp.tcpKeepalive":                                    Honoured,
		"trafficPolicy.connectionPool.tcp.tcpKeepalive.probes":                             Honoured,
		"trafficPolicy.connectionPool.tcp.tcpKeepalive.time":                               Honoured,
		"trafficPolicy.connectionPool.tcp.tcpKeepalive.interval":                           Honoured,
		"trafficPolicy.connectionPool.tcp.maxConnectionDuration":                           Honoured,
		"trafficPolicy.connectionPool.tcp.idleTimeout":                                     Honoured,
		"trafficPolicy.connectionPool.http":                                                Honoured,
		"trafficPolicy.connectionPool.http.http1MaxPendingRequests":                        Honoured,
		"trafficPolicy.connectionPool.http.http2MaxRequests":                               Honoured,
		"trafficPolicy.connectionPool.http.maxRequestsPerConnection":                       Honoured,
		"trafficPolicy.connectionPool.http.maxRetries":                                     Honoured,
		"trafficPolicy.connectionPool.http.idleTimeout":                                    Honoured,
		"trafficPolicy.connectionPool.http.h2UpgradePolicy":                                Honoured,
		"trafficPolicy.connectionPool.http.h2UpgradePolicy=DO_NOT_UPGRADE":                 Honoured,
		"trafficPolicy.connectionPool.http.h2UpgradePolicy=UPGRADE":                        Honoured,
		"trafficPolicy.connectionPool.http.useClientProtocol":                              Honoured,
		"trafficPolicy.connectionPool.http.maxConcurrentStreams":                           Honoured,
		"trafficPolicy.connectionPool.http.http2KeepAlive":                                 Honoured,
		"trafficPolicy.connectionPool.http.http2KeepAlive.interval":                        Honoured,
		"trafficPolicy.connectionPool.http.http2KeepAlive.timeout":                         Honoured,
		"trafficPolicy.outlierDetection":                                                   Honoured,
		"trafficPolicy.outlierDetection.consecutiveErrors":                                 Refused,
		"trafficPolicy.outlierDetection.splitExternalLocalOriginErrors":                    Honoured,
		"trafficPolicy.outlierDetection.consecutiveLocalOriginFailures":                    Honoured,
		"trafficPolicy.outlierDetection.consecutiveGatewayErrors":                          Honoured,
		"trafficPolicy.outlierDetection.consecutive5xxErrors":                              Honoured,
		"trafficPolicy.outlierDetection.interval":                                          Honoured,
		"trafficPolicy.outlierDetection.baseEjectionTime":                                  Honoured,
		"trafficPolicy.outlierDetection.maxEjectionPercent":                                Honoured,
		"trafficPolicy.outlierDetection.minHealthPercent":                                  Honoured,
		"trafficPolicy.outlierDetection.outlierDetectionHttpErrorCodes":                    Refused,
		"trafficPolicy.outlierDetection.failurePercentageThreshold":                        Refused,
		"trafficPolicy.tls":                                                                                  Honoured,
		"trafficPolicy.tls.mode":                                                                             Honoured,
		"trafficPolicy.tls.mode=SIMPLE":                                                                      Honoured,
		"trafficPolicy.tls.mode=MUTUAL":                                                                      Honoured,
		"trafficPolicy.tls.mode=ISTIO_MUTUAL":                                                                Honoured,
		"trafficPolicy.tls.clientCertificate":                                                                Honoured,
		"trafficPolicy.tls.privateKey":                                                                       Honoured,
		"trafficPolicy.tls.caCertificates":                                                                   Honoured,
		"trafficPolicy.tls.credentialName":                                                                   Refused,
		"trafficPolicy.tls.caCertCredentialName":                                                             Refused,
		"trafficPolicy.tls.subjectAltNames":                                                                  Honoured,
		"trafficPolicy.tls.sni":                                                                              Honoured,
		"trafficPolicy.tls.insecureSkipVerify":                                                               Honoured,
		"trafficPolicy.tls.caCrl":                                                                            Honoured,
		"trafficPolicy.portLevelSettings":                                                                    Honoured,
		"trafficPolicy.portLevelSettings.port":                                                               Honoured,
		"trafficPolicy.portLevelSettings.port.number":                                                        Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer":                                                       Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.simple":                                                Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.simple=LEAST_CONN":                                     Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.simple=RANDOM":                                         Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.simple=PASSTHROUGH":                                    Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.simple=ROUND_ROBIN":                                    Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.simple=LEAST_REQUEST":                                  Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.consistentHash":                                        Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.consistentHash.httpHeaderName":                         Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.consistentHash.httpCookie":                             Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.consistentHash.httpCookie.name":                        Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.consistentHash.httpCookie.path":                        Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.consistentHash.httpCookie.ttl":                         Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.consistentHash.httpCookie.attributes":                  Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.consistentHash.httpCookie.attributes.name":             Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.consistentHash.httpCookie.attributes.value":            Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.consistentHash.useSourceIp":                            Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.consistentHash.httpQueryParameterName":                 Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.consistentHash.ringHash":                               Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.consistentHash.ringHash.minimumRingSize":               Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.consistentHash.maglev":                                 Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.consistentHash.maglev.tableSize":                       Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.consistentHash.minimumRingSize":                        Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.backendUtilization":                                    Refused,
		"trafficPolicy.portLevelSettings.loadBalancer.backendUtilization.weightStabilizationPeriod":          Refused,
		"trafficPolicy.portLevelSettings.loadBalancer.backendUtilization.weightExpirationPeriod":             Refused,
		"trafficPolicy.portLevelSettings.loadBalancer.backendUtilization.weightUpdatePeriod":                 Refused,
		"trafficPolicy.portLevelSettings.loadBalancer.backendUtilization.errorUtilizationPenaltyPercent":     Refused,
		"trafficPolicy.portLevelSettings.loadBalancer.backendUtilization.metricNamesForComputingUtilization": Refused,
		"trafficPolicy.portLevelSettings.loadBalancer.localityLbSetting":                                     Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.localityLbSetting.distribute":                          Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.localityLbSetting.distribute.from":                     Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.localityLbSetting.distribute.to":                       Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.localityLbSetting.failover":                            Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.localityLbSetting.failover.from":                       Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.localityLbSetting.failover.to":                         Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.localityLbSetting.failoverPriority":                    Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.localityLbSetting.enabled":                             Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.zoneAwareLbSetting":                                    Refused,
		"trafficPolicy.portLevelSettings.loadBalancer.zoneAwareLbSetting.enabled":                            Refused,
		"trafficPolicy.portLevelSettings.loadBalancer.zoneAwareLbSetting.failover":                           Refused,
		"trafficPolicy.portLevelSettings.loadBalancer.zoneAwareLbSetting.failover.from":                      Refused,
		"trafficPolicy.portLevelSettings.loadBalancer.zoneAwareLbSetting.failover.to":                        Refused,
		"trafficPolicy.portLevelSettings.loadBalancer.zoneAwareLbSetting.failoverPriority":                   Refused,
		"trafficPolicy.portLevelSettings.loadBalancer.zoneAwareLbSetting.minClusterSize":                     Refused,
		"trafficPolicy.portLevelSettings.loadBalancer.warmupDurationSecs":                                    Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.warmup":                                                Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.warmup.duration":                                       Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.warmup.minimumPercent":                                 Honoured,
		"trafficPolicy.portLevelSettings.loadBalancer.warmup.aggression":                                     Honoured,
		"trafficPolicy.portLevelSettings.connectionPool":                                                     Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.tcp":                                                 Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.tcp.maxConnections":                                  Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.tcp.connectTimeout":                                  Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.tcp.tcpKeepalive":                                    Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.tcp.tcpKeepalive.probes":                             Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.tcp.tcpKeepalive.time":                               Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.tcp.tcpKeepalive.interval":                           Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.tcp.maxConnectionDuration":                           Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.tcp.idleTimeout":                                     Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.http":                                                Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.http.http1MaxPendingRequests":                        Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.http.http2MaxRequests":                               Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.http.maxRequestsPerConnection":                       Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.http.maxRetries":                                     Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.http.idleTimeout":                                    Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.http.h2UpgradePolicy":                                Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.http.h2UpgradePolicy=DO_NOT_UPGRADE":                 Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.http.h2UpgradePolicy=UPGRADE":                        Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.http.useClientProtocol":                              Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.http.maxConcurrentStreams":                           Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.http.http2KeepAlive":                                 Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.http.http2KeepAlive.interval":                        Honoured,
		"trafficPolicy.portLevelSettings.connectionPool.http.http2KeepAlive.timeout":                         Honoured,
		"trafficPolicy.portLevelSettings.outlierDetection":                                                   Honoured,
		"trafficPolicy.portLevelSettings.outlierDetection.consecutiveErrors":                                 Refused,
		"trafficPolicy.portLevelSettings.outlierDetection.splitExternalLocalOriginErrors":                    Honoured,
		"trafficPolicy.portLevelSettings.outlierDetection.consecutiveLocalOriginFailures":                    Honoured,
		"trafficPolicy.portLevelSettings.outlierDetection.consecutiveGatewayErrors":                          Honoured,
		"trafficPolicy.portLevelSettings.outlierDetection.consecutive5xxErrors":                              Honoured,
		"trafficPolicy.portLevelSettings.outlierDetection.interval":                                          Honoured,
		"trafficPolicy.portLevelSettings.outlierDetection.baseEjectionTime":                                  Honoured,
		"trafficPolicy.portLevelSettings.outlierDetection.maxEjectionPercent":                                Honoured,
		"trafficPolicy.portLevelSettings.outlierDetection.minHealthPercent":                                  Honoured,
		"trafficPolicy.portLevelSettings.outlierDetection.outlierDetectionHttpErrorCodes":                    Refused,
		"trafficPolicy.portLevelSettings.outlierDetection.failurePercentageThreshold":                        Refused,
		"trafficPolicy.portLevelSettings.tls":                                                                Honoured,
		"trafficPolicy.portLevelSettings.tls.mode":                                                           Honoured,
		"trafficPolicy.portLevelSettings.tls.mode=SIMPLE":                                                    Honoured,
		"trafficPolicy.portLevelSettings.tls.mode=MUTUAL":                                                    Honoured,
		"trafficPolicy.portLevelSettings.tls.mode=ISTIO_MUTUAL":                                              Honoured,
		"trafficPolicy.portLevelSettings.tls.clientCertificate":                                              Honoured,
		"trafficPolicy.portLevelSettings.tls.privateKey":                                                     Honoured,
		"trafficPolicy.portLevelSettings.tls.caCertificates":                                                 Honoured,
		"trafficPolicy.portLevelSettings.tls.credentialName":                                                 Refused,
		"trafficPolicy.portLevelSettings.tls.caCertCredentialName":                                           Refused,
		"trafficPolicy.portLevelSettings.tls.subjectAltNames":                                                Honoured,
		"trafficPolicy.portLevelSettings.tls.sni":                                                            Honoured,
		"trafficPolicy.portLevelSettings.tls.insecureSkipVerify":                                             Honoured,
		"trafficPolicy.portLevelSettings.tls.caCrl":                                                          Honoured,
		"trafficPolicy.tunnel":                          Refused,
		"trafficPolicy.tunnel.protocol":                 Refused,
		"trafficPolicy.tunnel.targetHost":               Refused,
		"trafficPolicy.tunnel.targetPort":               Refused,
		"trafficPolicy.proxyProtocol":                   Honoured,
		"trafficPolicy.proxyProtocol.version":           Honoured,
		"trafficPolicy.proxyProtocol.version=V2":        Honoured,
		"trafficPolicy.retryBudget":                     Honoured,
		"trafficPolicy.retryBudget.percent":             Honoured,
		"trafficPolicy.retryBudget.minRetryConcurrency": Honoured,
		"trafficPolicy.retryBudget.budgetInterval":      Refused,
		"subsets":                                   Honoured,
		"subsets.name":                              Honoured,
		"subsets.labels":                            Honoured,
		"subsets.trafficPolicy":                     Honoured,
		"subsets.trafficPolicy.loadBalancer":        Honoured,
		"subsets.trafficPolicy.loadBalancer.simple": Honoured,
		"subsets.trafficPolicy.loadBalancer.simple=LEAST_CONN":                                                       Honoured,
		"subsets.trafficPolicy.loadBalancer.simple=RANDOM":                                                           Honoured,
		"subsets.trafficPolicy.loadBalancer.simple=PASSTHROUGH":                                                      Honoured,
		"subsets.trafficPolicy.loadBalancer.simple=ROUND_ROBIN":                                                      Honoured,
		"subsets.trafficPolicy.loadBalancer.simple=LEAST_REQUEST":                                                    Honoured,
		"subsets.trafficPolicy.loadBalancer.consistentHash":                                                          Honoured,
		"subsets.trafficPolicy.loadBalancer.consistentHash.httpHeaderName":                                           Honoured,
		"subsets.trafficPolicy.loadBalancer.consistentHash.httpCookie":                                               Honoured,
		"subsets.trafficPolicy.loadBalancer.consistentHash.httpCookie.name":                                          Honoured,
		"subsets.trafficPolicy.loadBalancer.consistentHash.httpCookie.path":                                          Honoured,
		"subsets.trafficPolicy.loadBalancer.consistentHash.httpCookie.ttl":                                           Honoured,
		"subsets.trafficPolicy.loadBalancer.consistentHash.httpCookie.attributes":                                    Honoured,
		"subsets.trafficPolicy.loadBalancer.consistentHash.httpCookie.attributes.name":                               Honoured,
		"subsets.trafficPolicy.loadBalancer.consistentHash.httpCookie.attributes.value":                              Honoured,
		"subsets.trafficPolicy.loadBalancer.consistentHash.useSourceIp":                                              Honoured,
		"subsets.trafficPolicy.loadBalancer.consistentHash.httpQueryParameterName":                                   Honoured,
		"subsets.trafficPolicy.loadBalancer.consistentHash.ringHash":                                                 Honoured,
		"subsets.trafficPolicy.loadBalancer.consistentHash.ringHash.minimumRingSize":                                 Honoured,
		"subsets.trafficPolicy.loadBalancer.consistentHash.maglev":                                                   Honoured,
		"subsets.trafficPolicy.loadBalancer.consistentHash.maglev.tableSize":                                         Honoured,
		"subsets.trafficPolicy.loadBalancer.consistentHash.minimumRingSize":                                          Honoured,
		"subsets.trafficPolicy.loadBalancer.backendUtilization":                                                      Refused,
		"subsets.trafficPolicy.loadBalancer.backendUtilization.weightStabilizationPeriod":                            Refused,
		"subsets.trafficPolicy.loadBalancer.backendUtilization.weightExpirationPeriod":                               Refused,
		"subsets.trafficPolicy.loadBalancer.backendUtilization.weightUpdatePeriod":                                   Refused,
		"subsets.trafficPolicy.loadBalancer.backendUtilization.errorUtilizationPenaltyPercent":                       Refused,
		"subsets.trafficPolicy.loadBalancer.backendUtilization.metricNamesForComputingUtilization":                   Refused,
		"subsets.trafficPolicy.loadBalancer.localityLbSetting":                                                       Honoured,
		"subsets.trafficPolicy.loadBalancer.localityLbSetting.distribute":                                            Honoured,
		"subsets.trafficPolicy.loadBalancer.localityLbSetting.distribute.from":                                       Honoured,
		"subsets.trafficPolicy.loadBalancer.localityLbSetting.distribute.to":                                         Honoured,
		"subsets.trafficPolicy.loadBalancer.localityLbSetting.failover":                                              Honoured,
		"subsets.trafficPolicy.loadBalancer.localityLbSetting.failover.from":                                         Honoured,
		"subsets.trafficPolicy.loadBalancer.localityLbSetting.failover.to":                                           Honoured,
		"subsets.trafficPolicy.loadBalancer.localityLbSetting.failoverPriority":                                      Honoured,
		"subsets.trafficPolicy.loadBalancer.localityLbSetting.enabled":                                               Honoured,
		"subsets.trafficPolicy.loadBalancer.zoneAwareLbSetting":                                                      Refused,
		"subsets.trafficPolicy.loadBalancer.zoneAwareLbSetting.enabled":                                              Refused,
		"subsets.trafficPolicy.loadBalancer.zoneAwareLbSetting.failover":                                             Refused,
		"subsets.trafficPolicy.loadBalancer.zoneAwareLbSetting.failover.from":                                        Refused,
		"subsets.trafficPolicy.loadBalancer.zoneAwareLbSetting.failover.to":                                          Refused,
		"subsets.trafficPolicy.loadBalancer.zoneAwareLbSetting.failoverPriority":                                     Refused,
		"subsets.trafficPolicy.loadBalancer.zoneAwareLbSetting.minClusterSize":                                       Refused,
		"subsets.trafficPolicy.loadBalancer.warmupDurationSecs":                                                      Honoured,
		"subsets.trafficPolicy.loadBalancer.warmup":                                                                  Honoured,
		"subsets.trafficPolicy.loadBalancer.warmup.duration":                                                         Honoured,
		"subsets.trafficPolicy.loadBalancer.warmup.minimumPercent":                                                   Honoured,
		"subsets.trafficPolicy.loadBalancer.warmup.aggression":                                                       Honoured,
		"subsets.trafficPolicy.connectionPool":                                                                       Honoured,
		"subsets.trafficPolicy.connectionPool.tcp":                                                                   Honoured,
		"subsets.trafficPolicy.connectionPool.tcp.maxConnections":                                                    Honoured,
		"subsets.trafficPolicy.connectionPool.tcp.connectTimeout":                                                    Honoured,
		"subsets.trafficPolicy.connectionPool.tcp.tcpKeepalive":                                                      Honoured,
		"subsets.trafficPolicy.connectionPool.tcp.tcpKeepalive.probes":                                               Honoured,
		"subsets.trafficPolicy.connectionPool.tcp.tcpKeepalive.time":                                                 Honoured,
		"subsets.trafficPolicy.connectionPool.tcp.tcpKeepalive.interval":                                             Honoured,
		"subsets.trafficPolicy.connectionPool.tcp.maxConnectionDuration":                                             Honoured,
		"subsets.trafficPolicy.connectionPool.tcp.idleTimeout":                                                       Honoured,
		"subsets.trafficPolicy.connectionPool.http":                                                                  Honoured,
		"subsets.trafficPolicy.connectionPool.http.http1MaxPendingRequests":                                          Honoured,
		"subsets.trafficPolicy.connectionPool.http.http2MaxRequests":                                                 Honoured,
		"subsets.trafficPolicy.connectionPool.http.maxRequestsPerConnection":                                         Honoured,
		"subsets.trafficPolicy.connectionPool.http.maxRetries":                                                       Honoured,
		"subsets.trafficPolicy.connectionPool.http.idleTimeout":                                                      Honoured,
		"subsets.trafficPolicy.connectionPool.http.h2UpgradePolicy":                                                  Honoured,
		"subsets.trafficPolicy.connectionPool.http.h2UpgradePolicy=DO_NOT_UPGRADE":                                   Honoured,
		"subsets.trafficPolicy.connectionPool.http.h2UpgradePolicy=UPGRADE":                                          Honoured,
		"subsets.trafficPolicy.connectionPool.http.useClientProtocol":                                                Honoured,
		"subsets.trafficPolicy.connectionPool.http.maxConcurrentStreams":                                             Honoured,
		"subsets.trafficPolicy.connectionPool.http.http2KeepAlive":                                                   Honoured,
		"subsets.trafficPolicy.connectionPool.http.http2KeepAlive.interval":                                          Honoured,
		"subsets.trafficPolicy.connectionPool.http.http2KeepAlive.timeout":                                           Honoured,
		"subsets.trafficPolicy.outlierDetection":                                                                     Honoured,
		"subsets.trafficPolicy.outlierDetection.consecutiveErrors":                                                   Refused,
		"subsets.trafficPolicy.outlierDetection.splitExternalLocalOriginErrors":                                      Honoured,
		"subsets.trafficPolicy.outlierDetection.consecutiveLocalOriginFailures":                                      Honoured,
		"subsets.trafficPolicy.outlierDetection.consecutiveGatewayErrors":                                            Honoured,
		"subsets.trafficPolicy.outlierDetection.consecutive5xxErrors":                                                Honoured,
		"subsets.trafficPolicy.outlierDetection.interval":                                                            Honoured,
		"subsets.trafficPolicy.outlierDetection.baseEjectionTime":                                                    Honoured,
		"subsets.trafficPolicy.outlierDetection.maxEjectionPercent":                                                  Honoured,
		"subsets.trafficPolicy.outlierDetection.minHealthPercent":                                                    Honoured,
		"subsets.trafficPolicy.outlierDetection.outlierDetectionHttpErrorCodes":                                      Refused,
		"subsets.trafficPolicy.outlierDetection.failurePercentageThreshold":                                          Refused,
		"subsets.trafficPolicy.tls":                                                                                  Honoured,
		"subsets.trafficPolicy.tls.mode":                                                                             Honoured,
		"subsets.trafficPolicy.tls.mode=SIMPLE":                                                                      Honoured,
		"subsets.trafficPolicy.tls.mode=MUTUAL":                                                                      Honoured,
		"subsets.trafficPolicy.tls.mode=ISTIO_MUTUAL":                                                                Honoured,
		"subsets.trafficPolicy.tls.clientCertificate":                                                                Honoured,
		"subsets.trafficPolicy.tls.privateKey":                                                                       Honoured,
		"subsets.trafficPolicy.tls.caCertificates":                                                                   Honoured,
		"subsets.trafficPolicy.tls.credentialName":                                                                   Refused,
		"subsets.trafficPolicy.tls.caCertCredentialName":                                                             Refused,
		"subsets.trafficPolicy.tls.subjectAltNames":                                                                  Honoured,
		"subsets.trafficPolicy.tls.sni":                                                                              Honoured,
		"subsets.trafficPolicy.tls.insecureSkipVerify":                                                               Honoured,
		"subsets.trafficPolicy.tls.caCrl":                                                                            Honoured,
		"subsets.trafficPolicy.portLevelSettings":                                                                    Honoured,
		"subsets.trafficPolicy.portLevelSettings.port":                                                               Honoured,
		"subsets.trafficPolicy.portLevelSettings.port.number":                                                        Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer":                                                       Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.simple":                                                Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.simple=LEAST_CONN":                                     Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.simple=RANDOM":                                         Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.simple=PASSTHROUGH":                                    Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.simple=ROUND_ROBIN":                                    Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.simple=LEAST_REQUEST":                                  Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.consistentHash":                                        Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.consistentHash.httpHeaderName":                         Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.consistentHash.httpCookie":                             Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.consistentHash.httpCookie.name":                        Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.consistentHash.httpCookie.path":                        Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.consistentHash.httpCookie.ttl":                         Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.consistentHash.httpCookie.attributes":                  Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.consistentHash.httpCookie.attributes.name":             Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.consistentHash.httpCookie.attributes.value":            Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.consistentHash.useSourceIp":                            Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.consistentHash.httpQueryParameterName":                 Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.consistentHash.ringHash":                               Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.consistentHash.ringHash.minimumRingSize":               Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.consistentHash.maglev":                                 Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.consistentHash.maglev.tableSize":                       Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.consistentHash.minimumRingSize":                        Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.backendUtilization":                                    Refused,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.backendUtilization.weightStabilizationPeriod":          Refused,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.backendUtilization.weightExpirationPeriod":             Refused,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.backendUtilization.weightUpdatePeriod":                 Refused,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.backendUtilization.errorUtilizationPenaltyPercent":     Refused,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.backendUtilization.metricNamesForComputingUtilization": Refused,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.localityLbSetting":                                     Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.localityLbSetting.distribute":                          Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.localityLbSetting.distribute.from":                     Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.localityLbSetting.distribute.to":                       Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.localityLbSetting.failover":                            Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.localityLbSetting.failover.from":                       Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.localityLbSetting.failover.to":                         Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.localityLbSetting.failoverPriority":                    Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.localityLbSetting.enabled":                             Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.zoneAwareLbSetting":                                    Refused,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.zoneAwareLbSetting.enabled":                            Refused,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.zoneAwareLbSetting.failover":                           Refused,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.zoneAwareLbSetting.failover.from":                      Refused,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.zoneAwareLbSetting.failover.to":                        Refused,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.zoneAwareLbSetting.failoverPriority":                   Refused,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.zoneAwareLbSetting.minClusterSize":                     Refused,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.warmupDurationSecs":                                    Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.warmup":                                                Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.warmup.duration":                                       Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.warmup.minimumPercent":                                 Honoured,
		"subsets.trafficPolicy.portLevelSettings.loadBalancer.warmup.aggression":                                     Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool":                                                     Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.tcp":                                                 Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.tcp.maxConnections":                                  Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.tcp.connectTimeout":                                  Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.tcp.tcpKeepalive":                                    Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.tcp.tcpKeepalive.probes":                             Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.tcp.tcpKeepalive.time":                               Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.tcp.tcpKeepalive.interval":                           Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.tcp.maxConnectionDuration":                           Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.tcp.idleTimeout":                                     Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.http":                                                Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.http.http1MaxPendingRequests":                        Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.http.http2MaxRequests":                               Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.http.maxRequestsPerConnection":                       Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.http.maxRetries":                                     Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.http.idleTimeout":                                    Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.http.h2UpgradePolicy":                                Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.http.h2UpgradePolicy=DO_NOT_UPGRADE":                 Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.http.h2UpgradePolicy=UPGRADE":                        Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.http.useClientProtocol":                              Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.http.maxConcurrentStreams":                           Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.http.http2KeepAlive":                                 Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.http.http2KeepAlive.interval":                        Honoured,
		"subsets.trafficPolicy.portLevelSettings.connectionPool.http.http2KeepAlive.timeout":                         Honoured,
		"subsets.trafficPolicy.portLevelSettings.outlierDetection":                                                   Honoured,
		"subsets.trafficPolicy.portLevelSettings.outlierDetection.consecutiveErrors":                                 Refused,
		"subsets.trafficPolicy.portLevelSettings.outlierDetection.splitExternalLocalOriginErrors":                    Honoured,
		"subsets.trafficPolicy.portLevelSettings.outlierDetection.consecutiveLocalOriginFailures":                    Honoured,
		"subsets.trafficPolicy.portLevelSettings.outlierDetection.consecutiveGatewayErrors":                          Honoured,
		"subsets.trafficPolicy.portLevelSettings.outlierDetection.consecutive5xxErrors":                              Honoured,
		"subsets.trafficPolicy.portLevelSettings.outlierDetection.interval":                                          Honoured,
		"subsets.trafficPolicy.portLevelSettings.outlierDetection.baseEjectionTime":                                  Honoured,
		"subsets.trafficPolicy.portLevelSettings.outlierDetection.maxEjectionPercent":                                Honoured,
		"subsets.trafficPolicy.portLevelSettings.outlierDetection.minHealthPercent":                                  Honoured,
		"subsets.trafficPolicy.portLevelSettings.outlierDetection.outlierDetectionHttpErrorCodes":                    Refused,
		"subsets.trafficPolicy.portLevelSettings.outlierDetection.failurePercentageThreshold":                        Refused,
		"subsets.trafficPolicy.portLevelSettings.tls":                                                                Honoured,
		"subsets.trafficPolicy.portLevelSettings.tls.mode":                                                           Honoured,
		"subsets.trafficPolicy.portLevelSettings.tls.mode=SIMPLE":                                                    Honoured,
		"subsets.trafficPolicy.portLevelSettings.tls.mode=MUTUAL":                                                    Honoured,
		"subsets.trafficPolicy.portLevelSettings.tls.mode=ISTIO_MUTUAL":                                              Honoured,
		"subsets.trafficPolicy.portLevelSettings.tls.clientCertificate":                                              Honoured,
		"subsets.trafficPolicy.portLevelSettings.tls.privateKey":                                                     Honoured,
		"subsets.trafficPolicy.portLevelSettings.tls.caCertificates":                                                 Honoured,
		"subsets.trafficPolicy.portLevelSettings.tls.credentialName":                                                 Refused,
		"subsets.trafficPolicy.portLevelSettings.tls.caCertCredentialName":                                           Refused,
		"subsets.trafficPolicy.portLevelSettings.tls.subjectAltNames":                                                Honoured,
		"subsets.trafficPolicy.portLevelSettings.tls.sni":                                                            Honoured,
		"subsets.trafficPolicy.portLevelSettings.tls.insecureSkipVerify":                                             Honoured,
		"subsets.trafficPolicy.portLevelSettings.tls.caCrl":                                                          Honoured,
		"subsets.trafficPolicy.tunnel":                                                                               Refused,
		"subsets.trafficPolicy.tunnel.protocol":                                                                      Refused,
		"subsets.trafficPolicy.tunnel.targetHost":                                                                    Refused,
		"subsets.trafficPolicy.tunnel.targetPort":                                                                    Refused,
		"subsets.trafficPolicy.proxyProtocol":                                                                        Honoured,
		"subsets.trafficPolicy.proxyProtocol.version":                                                                Honoured,
		"subsets.trafficPolicy.proxyProtocol.version=V2":                                                             Honoured,
		"subsets.trafficPolicy.retryBudget":                                                                          Honoured,
		"subsets.trafficPolicy.retryBudget.percent":                                                                  Honoured,
		"subsets.trafficPolicy.retryBudget.minRetryConcurrency":                                                      Honoured,
		"subsets.trafficPolicy.retryBudget.budgetInterval":                                                           Refused,
		"exportTo":                     Honoured,
		"workloadSelector":             Refused,
		"workloadSelector.matchLabels": Refused,
	},
	KindServiceEntry: {
		"hosts":                      Honoured,
		"addresses":                  Honoured,
		"ports":                      Honoured,
		"ports.number":               Honoured,
		"ports.protocol":             Honoured,
		"ports.name":                 Honoured,
		"ports.targetPort":           Honoured,
		"location":                   Honoured,
		"location=MESH_INTERNAL":     Honoured,
		"resolution":                 Honoured,
		"resolution=STATIC":          Honoured,
		"resolution=DNS":             Honoured,
		"resolution=DNS_ROUND_ROBIN": Honoured,
		"resolution=DYNAMIC_DNS":     Refused,
		"endpoints":                  Honoured,
		"endpoints.address":          Honoured,
		"endpoints.ports":            Honoured,
		"endpoints.labels":           Honoured,
		"endpoints.network":          Refused,
		"endpoints.locality":         Honoured,
		"endpoints.weight":           Honoured,
		"endpoints.serviceAccount":   Refused,
		"workloadSelector":           Honoured,
		"workloadSelector.labels":    Honoured,
		"exportTo":                   Honoured,
		"subjectAltNames":            Refused,
	},
	KindAuthorizationPolicy: authorizationPolicySupport, // support_authz.go
	KindSidecar: {
		"workloadSelector":                                           Honoured,
		"workloadSelector.labels":                                    Honoured,
		"ingress":                                                    Honoured,
		"ingress.port":                                               Honoured,
		"ingress.port.number":                                        Honoured,
		"ingress.port.protocol":                                      Honoured,
		"ingress.port.name":                                          Honoured,
		"ingress.port.targetPort":                                    Refused,
		"ingress.bind":                                               Honoured,
		"ingress.captureMode":                                        Honoured,
		"ingress.captureMode=IPTABLES":                               Honoured,
		"ingress.captureMode=NONE":                                   Honoured,
		"ingress.defaultEndpoint":                                    Honoured,
		"ingress.tls":                                                Refused,
		"ingress.tls.httpsRedirect":                                  Refused,
		"ingress.tls.mode":                                           Refused,
		"ingress.tls.mode=SIMPLE":                                    Refused,
		"ingress.tls.mode=MUTUAL":                                    Refused,
		"ingress.tls.mode=AUTO_PASSTHROUGH":                          Refused,
		"ingress.tls.mode=ISTIO_MUTUAL":                              Refused,
		"ingress.tls.mode=OPTIONAL_MUTUAL":                           Refused,
		"ingress.tls.serverCertificate":                              Refused,
		"ingress.tls.privateKey":                                     Refused,
		"ingress.tls.caCertificates":                                 Refused,
		"ingress.tls.caCrl":                                          Refused,
		"ingress.tls.credentialName":                                 Refused,
		"ingress.tls.credentialNames":                                Refused,
		"ingress.tls.caCertCredentialName":                           Refused,
		"ingress.tls.tlsCertificates":                                Refused,
		"ingress.tls.tlsCertificates.serverCertificate":              Refused,
		"ingress.tls.tlsCertificates.privateKey":                     Refused,
		"ingress.tls.tlsCertificates.caCertificates":                 Refused,
		"ingress.tls.subjectAltNames":                                Refused,
		"ingress.tls.verifyCertificateSpki":                          Refused,
		"ingress.tls.verifyCertificateHash":                          Refused,
		"ingress.tls.minProtocolVersion":                             Refused,
		"ingress.tls.minProtocolVersion=TLSV1_0":                     Refused,
		"ingress.tls.minProtocolVersion=TLSV1_1":                     Refused,
		"ingress.tls.minProtocolVersion=TLSV1_2":                     Refused,
		"ingress.tls.minProtocolVersion=TLSV1_3":                     Refused,
		"ingress.tls.maxProtocolVersion":                             Refused,
		"ingress.tls.maxProtocolVersion=TLSV1_0":                     Refused,
		"ingress.tls.maxProtocolVersion=TLSV1_1":                     Refused,
		"ingress.tls.maxProtocolVersion=TLSV1_2":                     Refused,
		"ingress.tls.maxProtocolVersion=TLSV1_3":                     Refused,
		"ingress.tls.cipherSuites":                                   Refused,
		"ingress.tls.insecureSkipVerify":                             Refused,
		"ingress.tls.ecdhCurves":                                     Refused,
		"ingress.tls.alpnProtocols":                                  Refused,
		"ingress.connectionPool":                                     Honoured,
		"ingress.connectionPool.tcp":                                 Honoured,
		"ingress.connectionPool.tcp.maxConnections":                  Honoured,
		"ingress.connectionPool.tcp.connectTimeout":                  Honoured,
		"ingress.connectionPool.tcp.tcpKeepalive":                    Honoured,
		"ingress.connectionPool.tcp.tcpKeepalive.probes":             Honoured,
		"ingress.connectionPool.tcp.tcpKeepalive.time":               Honoured,
		"ingress.connectionPool.tcp.tcpKeepalive.interval":           Honoured,
		"ingress.connectionPool.tcp.maxConnectionDuration":           Honoured,
		"ingress.connectionPool.tcp.idleTimeout":                     Honoured,
		"ingress.connectionPool.http":                                Honoured,
		"ingress.connectionPool.http.http1MaxPendingRequests":        Honoured,
		"ingress.connectionPool.http.http2MaxRequests":               Honoured,
		"ingress.connectionPool.http.maxRequestsPerConnection":       Honoured,
		"ingress.connectionPool.http.maxRetries":                     Refused,
		"ingress.connectionPool.http.idleTimeout":                    Honoured,
		"ingress.connectionPool.http.h2UpgradePolicy":                Honoured,
		"ingress.connectionPool.http.h2UpgradePolicy=DO_NOT_UPGRADE": Honoured,
		"ingress.connectionPool.http.h2UpgradePolicy=UPGRADE":        Honoured,
		"ingress.connectionPool.http.useClientProtocol":              Honoured,
		"ingress.connectionPool.http.maxConcurrentStreams":           Honoured,
		"ingress.connectionPool.http.http2KeepAlive":                 Refused,
		"ingress.connectionPool.http.http2KeepAlive.interval":        Refused,
		"ingress.connectionPool.http.http2KeepAlive.timeout":         Refused,
		"egress":                                                    Honoured,
		"egress.port":                                               Honoured,
		"egress.port.number":                                        Honoured,
		"egress.port.protocol":                                      Honoured,
		"egress.port.name":                                          Honoured,
		"egress.port.targetPort":                                    Refused,
		"egress.bind":                                               Honoured,
		"egress.captureMode":                                        Honoured,
		"egress.captureMode=IPTABLES":                               Honoured,
		"egress.captureMode=NONE":                                   Honoured,
		"egress.hosts":                                              Honoured,
		"inboundConnectionPool":                                     Honoured,
		"inboundConnectionPool.tcp":                                 Honoured,
		"inboundConnectionPool.tcp.maxConnections":                  Honoured,
		"inboundConnectionPool.tcp.connectTimeout":                  Honoured,
		"inboundConnectionPool.tcp.tcpKeepalive":                    Honoured,
		"inboundConnectionPool.tcp.tcpKeepalive.probes":             Honoured,
		"inboundConnectionPool.tcp.tcpKeepalive.time":               Honoured,
		"inboundConnectionPool.tcp.tcpKeepalive.interval":           Honoured,
		"inboundConnectionPool.tcp.maxConnectionDuration":           Honoured,
		"inboundConnectionPool.tcp.idleTimeout":                     Honoured,
		"inboundConnectionPool.http":                                Honoured,
		"inboundConnectionPool.http.http1MaxPendingRequests":        Honoured,
		"inboundConnectionPool.http.http2MaxRequests":               Honoured,
		"inboundConnectionPool.http.maxRequestsPerConnection":       Honoured,
		"inboundConnectionPool.http.maxRetries":                     Refused,
		"inboundConnectionPool.http.idleTimeout":                    Honoured,
		"inboundConnectionPool.http.h2UpgradePolicy":                Honoured,
		"inboundConnectionPool.http.h2UpgradePolicy=DO_NOT_UPGRADE": Honoured,
		"inboundConnectionPool.http.h2UpgradePolicy=UPGRADE":        Honoured,
		"inboundConnectionPool.http.useClientProtocol":              Honoured,
		"inboundConnectionPool.http.maxConcurrentStreams":           Honoured,
		"inboundConnectionPool.http.http2KeepAlive":                 Refused,
		"inboundConnectionPool.http.http2KeepAlive.interval":        Refused,
		"inboundConnectionPool.http.http2KeepAlive.timeout":         Refused,
		"outboundTrafficPolicy":                                     Honoured,
		"outboundTrafficPolicy.mode":                                Honoured,
		"outboundTrafficPolicy.mode=ALLOW_ANY":                      Honoured,
		"outboundTrafficPolicy.egressProxy":                         Refused,
		"outboundTrafficPolicy.egressProxy.host":                    Refused,
		"outboundTrafficPolicy.egressProxy.subset":                  Refused,
		"outboundTrafficPolicy.egressProxy.port":                    Refused,
		"outboundTrafficPolicy.egressProxy.port.number":             Refused,
	},
	KindPeerAuthentication: peerAuthenticationSupport, // support_peerauthn.go
	KindWorkloadEntry: {
		"address":        Honoured,
		"ports":          Honoured,
		"labels":         Honoured,
		"network":        Refused,
		"locality":       Honoured,
		"weight":         Honoured,
		"serviceAccount": Honoured,
	},
}

// FieldSupport is one entry of the registry.
type FieldSupport struct {
	Kind    model.Kind
	Path    string
	Support Support
}

// SupportTable lists the registry, by kind (in Kinds order) and then in
// the order of the message tree.
func SupportTable() []FieldSupport {
	var out []FieldSupport
	for _, kind := range Kinds {
		for _, p := range fieldPaths(newSpec(kind).ProtoReflect().Descriptor()) {
			s, ok := fieldSupport[kind][p]
			if !ok {
				s = Refused
			}
			out = append(out, FieldSupport{Kind: kind, Path: p, Support: s})
		}
	}
	return out
}

// fieldPaths lists every field path under md in declaration order, depth
// first, as fieldSupport spells them. Well-known types are leaves.
func fieldPaths(md protoreflect.MessageDescriptor) []string {
	var out []string
	var walk func(prefix string, md protoreflect.MessageDescriptor, stack []protoreflect.FullName)
	walk = func(prefix string, md protoreflect.MessageDescriptor, stack []protoreflect.FullName) {
		for _, name := range stack {
			if name == md.FullName() {
				return // a recursive message: its fields are listed once
			}
		}
		stack = append(stack, md.FullName())
		for i := range md.Fields().Len() {
			fd := md.Fields().Get(i)
			p := joinPath(prefix, fd.JSONName())
			out = append(out, p)
			if fd.Kind() == protoreflect.EnumKind {
				for j := 1; j < fd.Enum().Values().Len(); j++ {
					out = append(out, p+"="+string(fd.Enum().Values().Get(j).Name()))
				}
			}
			if sub := messageOf(fd); sub != nil && !isWellKnown(sub) {
				walk(p, sub, stack)
			}
		}
	}
	walk("", md, nil)
	return out
}

// messageOf is the message type of a field's values (a map's value type),
// or nil.
func messageOf(fd protoreflect.FieldDescriptor) protoreflect.MessageDescriptor {
	if fd.IsMap() {
		if fd.MapValue().Kind() == protoreflect.MessageKind {
			return fd.MapValue().Message()
		}
		return nil
	}
	if fd.Kind() == protoreflect.MessageKind {
		return fd.Message()
	}
	return nil
}

func joinPath(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// checkSupport refuses every set field of a spec whose state is Refused
// (or that the registry does not know), naming it with its indexes
// ("spec.http[0].fault"). The fields under a refused one are not looked at.
func checkSupport(el *errorList, kind model.Kind, spec protoreflect.Message) {
	table := fieldSupport[kind]
	var walk func(path, key string, m protoreflect.Message)
	walk = func(path, key string, m protoreflect.Message) {
		fields := m.Descriptor().Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			if !m.Has(fd) {
				continue
			}
			k := joinPath(key, fd.JSONName())
			p := path + "." + fd.JSONName()
			if table[k] != Honoured {
				el.addErr(p, ErrNotSupported)
				continue
			}
			v := m.Get(fd)
			if fd.Kind() == protoreflect.EnumKind && !fd.IsList() && !fd.IsMap() {
				name := enumValueName(fd, v.Enum())
				if s, ok := table[k+"="+name]; ok && s != Honoured {
					el.addErr(p, fmt.Errorf("%s %w", name, ErrNotSupported))
				}
				continue
			}
			sub := messageOf(fd)
			if sub == nil || isWellKnown(sub) {
				continue
			}
			switch {
			case fd.IsMap():
				var keys []protoreflect.MapKey
				v.Map().Range(func(mk protoreflect.MapKey, _ protoreflect.Value) bool {
					keys = append(keys, mk)
					return true
				})
				sort.Slice(keys, func(i, j int) bool { return mapKeyLess(keys[i], keys[j]) })
				for _, mk := range keys {
					walk(fmt.Sprintf("%s[%s]", p, mk.String()), k, v.Map().Get(mk).Message())
				}
			case fd.IsList():
				for j := range v.List().Len() {
					walk(fmt.Sprintf("%s[%d]", p, j), k, v.List().Get(j).Message())
				}
			default:
				walk(p, k, v.Message())
			}
		}
	}
	walk("spec", "", spec)
}

// mapKeyLess orders map keys: numbers by value (portLevelMtls is keyed
// by port), strings by bytes.
func mapKeyLess(a, b protoreflect.MapKey) bool {
	switch a.Interface().(type) {
	case uint32, uint64:
		return a.Uint() < b.Uint()
	case int32, int64:
		return a.Int() < b.Int()
	}
	return a.String() < b.String()
}

func enumValueName(fd protoreflect.FieldDescriptor, n protoreflect.EnumNumber) string {
	if ev := fd.Enum().Values().ByNumber(n); ev != nil {
		return string(ev.Name())
	}
	return fmt.Sprint(n)
}

// FieldsMarkdown renders the registry as docs/istio-fields.md.
func FieldsMarkdown() []byte {
	var b strings.Builder
	b.WriteString("# Istio fields in Strait\n\n")
	b.WriteString("Generated by `go run ./hack/istiofields` from `internal/config/support.go`; do not edit.\n\n")
	b.WriteString("Every field of the istio.io/api types Strait loads is either **honoured** end to end\n")
	b.WriteString("(straitd generates the Envoy config Istio generates for it and strait-proxy implements it)\n")
	b.WriteString("or **refused**: a document that sets it is not loaded, with the message\n")
	b.WriteString("`FILE: document N: FIELD: not supported by Strait yet` (in Kubernetes mode, logged at WARN\n")
	b.WriteString("with the object's name). Paths join field names with `.`; list elements and map values\n")
	b.WriteString("collapse (`http.match.headers.exact`). `field=VALUE` rows are the values of an enum; its\n")
	b.WriteString("zero value is what an unset field means and is governed by the field's own row.\n")
	tbl := SupportTable()
	for _, kind := range Kinds {
		honoured, total := 0, 0
		for _, f := range tbl {
			if f.Kind == kind {
				total++
				if f.Support == Honoured {
					honoured++
				}
			}
		}
		fmt.Fprintf(&b, "\n## %s\n\n%d of %d honoured.\n\n| Field | State |\n|---|---|\n", kind, honoured, total)
		for _, f := range tbl {
			if f.Kind == kind {
				fmt.Fprintf(&b, "| `%s` | %s |\n", f.Path, f.Support)
			}
		}
	}
	return []byte(b.String())
}
