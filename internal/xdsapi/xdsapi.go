// Package xdsapi holds the xDS protocol vocabulary that Strait's xDS
// server, its ADS clients (the data plane's, the agent's relay, the
// benchmark) and its tools share: the resource type URLs and the size limit
// of one ADS message. It imports nothing of Strait's, so that any layer can
// use it without linking another.
package xdsapi

// Type URLs of the resource types Strait serves and consumes over ADS.
const (
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	RouteType    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	// SecretType is SDS's: the workload certificates an agent serves its
	// proxy, and the Gateways' credentials straitd serves gateways.
	SecretType = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
)

// MaxMessageSize bounds one ADS message an ADS client receives or relays
// (gRPC's default of 4 MiB is too small for a big mesh's CDS or EDS).
//
// Every hop of the path uses the same limit: a relay that accepts more than
// the proxy behind it only moves the failure to the proxy, where it becomes
// a reconnect loop (the control plane sends the same response again). The
// value is the larger of the two limits used before (64 MiB in the proxy,
// 256 MiB in the agent's relay and the benchmark client): a state-of-the-world
// EDS response of an unscoped mesh with tens of thousands of endpoints
// passes 64 MiB, while 256 MiB still bounds what a broken or hostile peer
// can make a client buffer.
const MaxMessageSize = 256 << 20
