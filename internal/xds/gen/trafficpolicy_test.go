package gen

import (
	"fmt"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
)

const tpService = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: s, namespace: ns}
spec:
  hosts: [s.ns.svc.cluster.local]
  ports: [{number: 80, name: http, protocol: HTTP}, {number: 81, name: http-b, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
`

func tpSnapshot(t *testing.T, dr string) *mesh.Snapshot {
	t.Helper()
	store := istioconfig.NewStore()
	for _, doc := range []string{tpService, dr} {
		res := istioconfig.ParseFile("x.yaml", []byte(doc))
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		for _, c := range res.Configs {
			if err := store.Add(c); err != nil {
				t.Fatal(err)
			}
		}
	}
	snap, errs := mesh.Build(store, mesh.BuildOptions{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return snap
}

// Which consistentHash a destination's route gets, as Istio's
// HashForHTTPDestination picks it: the subset's port-level settings, the
// subset's, the rule's port-level settings, the rule's.
func TestConsistentHashPrecedence(t *testing.T) {
	snap := tpSnapshot(t, `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: s, namespace: ns}
spec:
  host: s.ns.svc.cluster.local
  trafficPolicy:
    loadBalancer: {consistentHash: {httpHeaderName: top}}
    portLevelSettings:
    - port: {number: 81}
      loadBalancer: {consistentHash: {httpHeaderName: top-81}}
  subsets:
  - name: a
    labels: {v: a}
    trafficPolicy:
      loadBalancer: {consistentHash: {httpHeaderName: a}}
      portLevelSettings:
      - port: {number: 81}
        loadBalancer: {consistentHash: {httpHeaderName: a-81}}
  - name: b
    labels: {v: b}
    trafficPolicy:
      loadBalancer: {simple: RANDOM}
`)
	const host = "s.ns.svc.cluster.local"
	for _, c := range []struct {
		subset string
		port   uint32
		want   string
	}{
		{"", 80, "top"}, {"", 81, "top-81"}, {"a", 80, "a"}, {"a", 81, "a-81"},
		{"b", 80, "top"}, {"b", 81, "top-81"}, {"missing", 80, "top"},
	} {
		got := consistentHashFor(snap, "ns", host, c.subset, c.port).GetHttpHeaderName()
		if got != c.want {
			t.Errorf("subset %q port %d: hash on %q, want %q", c.subset, c.port, got, c.want)
		}
	}
	if h := consistentHashFor(snap, "ns", "other.ns.svc.cluster.local", "", 80); h != nil {
		t.Errorf("a host without a rule got %v", h)
	}
}

// How a cluster's policy is merged: port-level settings replace the level
// they are on whole; a subset's policy overrides what it sets.
func TestTrafficPolicyMerge(t *testing.T) {
	snap := tpSnapshot(t, `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: s, namespace: ns}
spec:
  host: s.ns.svc.cluster.local
  trafficPolicy:
    loadBalancer: {simple: RANDOM}
    outlierDetection: {consecutive5xxErrors: 3}
    tls: {mode: SIMPLE}
    portLevelSettings:
    - port: {number: 81}
      connectionPool: {tcp: {maxConnections: 7}}
  subsets:
  - name: a
    labels: {v: a}
    trafficPolicy:
      connectionPool: {tcp: {maxConnections: 9}}
      outlierDetection: {consecutive5xxErrors: 5}
      tls: {mode: DISABLE}
  - name: p
    labels: {v: p}
    trafficPolicy:
      loadBalancer: {simple: ROUND_ROBIN}
      portLevelSettings:
      - port: {number: 80}
        outlierDetection: {consecutive5xxErrors: 1}
`)
	const host = "s.ns.svc.cluster.local"
	type want struct {
		lb       string
		od, conn uint32 // 0: none
		tls      string // "": none
	}
	for _, c := range []struct {
		subset string
		port   uint32
		want   want
	}{
		{"", 80, want{"RANDOM", 3, 0, "SIMPLE"}},
		{"", 81, want{"", 0, 7, ""}},               // the port level replaces the top level whole
		{"a", 80, want{"RANDOM", 5, 9, "DISABLE"}}, // the subset's pool, outlier detection and tls
		{"a", 81, want{"", 5, 9, "DISABLE"}},
		// The subset's port level replaces the subset's policy and the
		// rule's for that port, unset parts included.
		{"p", 80, want{"", 1, 0, ""}},
		{"p", 81, want{"ROUND_ROBIN", 0, 7, ""}},
	} {
		p := trafficPolicyFor(snap, "ns", host, c.subset, c.port)
		got := want{
			lb:   p.GetLoadBalancer().GetSimple().String(),
			od:   p.GetOutlierDetection().GetConsecutive_5XxErrors().GetValue(),
			conn: uint32(p.GetConnectionPool().GetTcp().GetMaxConnections()),
		}
		if p.GetLoadBalancer() == nil {
			got.lb = ""
		}
		if p.GetTls() != nil {
			got.tls = p.GetTls().GetMode().String()
		}
		if got != c.want {
			t.Errorf("subset %q port %d: %+v, want %+v", c.subset, c.port, got, c.want)
		}
	}
	if p := trafficPolicyFor(snap, "ns", "other.ns.svc.cluster.local", "", 80); p != nil {
		t.Errorf("a host without a rule got %v", p)
	}
}

// The lb_policy of each simple algorithm, Istio's default for the rest.
func TestApplyLoadBalancerPolicies(t *testing.T) {
	snap := tpSnapshot(t, `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: s, namespace: ns}
spec:
  host: s.ns.svc.cluster.local
  subsets:
  - {name: rr, labels: {v: a}, trafficPolicy: {loadBalancer: {simple: ROUND_ROBIN}}}
  - {name: lr, labels: {v: a}, trafficPolicy: {loadBalancer: {simple: LEAST_REQUEST}}}
  - {name: lc, labels: {v: a}, trafficPolicy: {loadBalancer: {simple: LEAST_CONN}}}
  - {name: rnd, labels: {v: a}, trafficPolicy: {loadBalancer: {simple: RANDOM}}}
  - {name: unset, labels: {v: a}, trafficPolicy: {loadBalancer: {simple: UNSPECIFIED}}}
  - {name: ring, labels: {v: a}, trafficPolicy: {loadBalancer: {consistentHash: {useSourceIp: true}}}}
`)
	want := map[string]cluster.Cluster_LbPolicy{
		"rr": cluster.Cluster_ROUND_ROBIN, "lr": cluster.Cluster_LEAST_REQUEST, "lc": cluster.Cluster_LEAST_REQUEST,
		"rnd": cluster.Cluster_RANDOM, "unset": cluster.Cluster_LEAST_REQUEST, "ring": cluster.Cluster_RING_HASH,
	}
	for name, lb := range want {
		c := &cluster.Cluster{}
		applyTrafficPolicy(c, trafficPolicyFor(snap, "ns", "s.ns.svc.cluster.local", name, 80), mesh.Port{})
		if c.LbPolicy != lb {
			t.Errorf("%s: lb_policy %s, want %s", name, c.LbPolicy, lb)
		}
		if name == "ring" && c.GetRingHashLbConfig().GetMinimumRingSize().GetValue() != 1024 {
			t.Errorf("consistentHash without a ring: minimum_ring_size %v, want Istio's 1024", c.GetRingHashLbConfig())
		}
	}
}

// tcpKeepalive: only the parts that are set (probes above 0), in seconds.
func TestApplyTCPKeepalive(t *testing.T) {
	for _, tc := range []struct {
		name string
		ka   *networking.ConnectionPoolSettings_TCPSettings_TcpKeepalive
		want string // probes/time/interval, "-" for unset
	}{
		{"time only", &networking.ConnectionPoolSettings_TCPSettings_TcpKeepalive{Time: durationpb.New(10 * time.Second)}, "-/10/-"},
		{"all", &networking.ConnectionPoolSettings_TCPSettings_TcpKeepalive{Probes: 1, Time: durationpb.New(time.Minute), Interval: durationpb.New(1500 * time.Millisecond)}, "1/60/1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cluster.Cluster{}
			applyConnectionPool(c, &networking.ConnectionPoolSettings{Tcp: &networking.ConnectionPoolSettings_TCPSettings{TcpKeepalive: tc.ka}}, nil)
			ka := c.GetUpstreamConnectionOptions().GetTcpKeepalive()
			show := func(v *wrapperspb.UInt32Value) string {
				if v == nil {
					return "-"
				}
				return fmt.Sprint(v.GetValue())
			}
			if got := show(ka.GetKeepaliveProbes()) + "/" + show(ka.GetKeepaliveTime()) + "/" + show(ka.GetKeepaliveInterval()); got != tc.want {
				t.Errorf("keepalive %s, want %s", got, tc.want)
			}
		})
	}
}

// The upstream PROXY protocol wraps the cluster's transport socket, or
// each of its transport socket matches (auto mTLS), or else a raw buffer.
func TestApplyUpstreamProxyProtocol(t *testing.T) {
	pp := &networking.TrafficPolicy_ProxyProtocol{Version: networking.TrafficPolicy_ProxyProtocol_V2}
	socket := func(name string) *core.TransportSocket { return &core.TransportSocket{Name: name} }
	inner := func(t *testing.T, ts *core.TransportSocket) string {
		t.Helper()
		if ts.GetName() != proxyProtocolSocketName {
			return "not wrapped: " + ts.GetName()
		}
		var p proxyprotocolv3.ProxyProtocolUpstreamTransport
		if err := ts.GetTypedConfig().UnmarshalTo(&p); err != nil {
			t.Fatal(err)
		}
		if p.GetConfig().GetVersion() != core.ProxyProtocolConfig_V2 {
			t.Errorf("version %v, want V2", p.GetConfig().GetVersion())
		}
		return p.GetTransportSocket().GetName()
	}

	c := &cluster.Cluster{}
	applyUpstreamProxyProtocol(c, nil)
	if c.TransportSocket != nil {
		t.Fatal("no proxyProtocol set a transport socket")
	}
	applyUpstreamProxyProtocol(c, pp)
	if got := inner(t, c.TransportSocket); got != rawBufferSocketName {
		t.Errorf("bare cluster: wraps %q, want %q", got, rawBufferSocketName)
	}

	c = &cluster.Cluster{TransportSocket: socket("tls")}
	applyUpstreamProxyProtocol(c, pp)
	if got := inner(t, c.TransportSocket); got != "tls" {
		t.Errorf("cluster with tls: wraps %q", got)
	}

	c = &cluster.Cluster{TransportSocketMatches: []*cluster.Cluster_TransportSocketMatch{{Name: "mtls", TransportSocket: socket("tls")}, {Name: "plain", TransportSocket: socket("raw")}}}
	applyUpstreamProxyProtocol(c, pp)
	if c.TransportSocket != nil {
		t.Errorf("cluster with matches got a transport socket %v", c.TransportSocket)
	}
	for i, want := range []string{"tls", "raw"} {
		if got := inner(t, c.TransportSocketMatches[i].GetTransportSocket()); got != want {
			t.Errorf("match %d wraps %q, want %q", i, got, want)
		}
	}
}
