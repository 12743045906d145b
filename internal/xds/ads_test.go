package xds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/straitmesh/strait/internal/debugapi"
	"github.com/straitmesh/strait/internal/nds"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

const (
	testNodeID    = "sidecar~10.1.0.2~client.demo~demo.svc.cluster.local"
	testDebounce  = 30 * time.Millisecond
	waitFor       = 5 * time.Second
	quietInterval = 150 * time.Millisecond
)

// fakeGenerator builds one cluster "c1", one listener "l1", and one
// ClusterLoadAssignment or RouteConfiguration per watched name. Every
// resource carries the generator's content version, so bump changes them.
type fakeGenerator struct {
	mu      sync.Mutex
	version int
	calls   []string // type labels, in call order
	// clusters and listeners are the names of the CDS and LDS resources;
	// nil means "c1" and "l1".
	clusters  []string
	listeners []string
	// endpoints counts changes of single ClusterLoadAssignments by name
	// (bumpEndpoints); unknownEDS names the ones the generator does not
	// know (it omits them, as a generator omits a deleted service's).
	endpoints  map[string]int
	unknownEDS map[string]bool
}

// bumpEndpoints changes the content of the named ClusterLoadAssignments
// only.
func (g *fakeGenerator) bumpEndpoints(names ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.endpoints == nil {
		g.endpoints = map[string]int{}
	}
	for _, n := range names {
		g.endpoints[n]++
	}
}

// setUnknownEDS sets the names of the ClusterLoadAssignments the generator
// omits.
func (g *fakeGenerator) setUnknownEDS(names ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.unknownEDS = map[string]bool{}
	for _, n := range names {
		g.unknownEDS[n] = true
	}
}

// setClusters replaces the generated cluster names.
func (g *fakeGenerator) setClusters(names ...string) {
	g.mu.Lock()
	g.clusters = names
	g.mu.Unlock()
}

func (g *fakeGenerator) bump() {
	g.mu.Lock()
	g.version++
	g.mu.Unlock()
}

func (g *fakeGenerator) Generate(proxy *proxypush.Proxy, typeURL string, watched []string, _ *proxypush.PushRequest) ([]*discovery.Resource, error) {
	g.mu.Lock()
	v := fmt.Sprint(g.version)
	g.calls = append(g.calls, typeLabel(typeURL))
	clusters, listeners := g.clusters, g.listeners
	zones := map[string]string{}
	for _, n := range watched {
		switch {
		case g.unknownEDS[n]:
		case g.endpoints[n] > 0:
			zones[n] = fmt.Sprintf("%s.%d", v, g.endpoints[n])
		default:
			zones[n] = v
		}
	}
	g.mu.Unlock()
	if clusters == nil {
		clusters = []string{"c1"}
	}
	if listeners == nil {
		listeners = []string{"l1"}
	}
	var msgs []proto.Message
	switch typeURL {
	case xdsapi.ClusterType:
		for _, n := range clusters {
			msgs = append(msgs, &cluster.Cluster{Name: n, AltStatName: v})
		}
	case xdsapi.ListenerType:
		for _, n := range listeners {
			msgs = append(msgs, &listener.Listener{Name: n, StatPrefix: v})
		}
	case xdsapi.EndpointType:
		for _, n := range watched {
			if zone, ok := zones[n]; ok {
				msgs = append(msgs, &endpoint.ClusterLoadAssignment{ClusterName: n, Endpoints: []*endpoint.LocalityLbEndpoints{{Locality: &core.Locality{Zone: zone}}}})
			}
		}
	case xdsapi.RouteType:
		for _, n := range watched {
			msgs = append(msgs, &route.RouteConfiguration{Name: n, VirtualHosts: []*route.VirtualHost{{Name: v, Domains: []string{"*"}}}})
		}
	case nds.TypeURL:
		// The name table is not a registered message: one raw resource.
		return []*discovery.Resource{{Resource: &anypb.Any{TypeUrl: nds.TypeURL, Value: nds.Marshal(nds.NameTable{"v" + v + ".example": {IPs: []string{"10.0.0.1"}}})}}}, nil
	default:
		return nil, fmt.Errorf("unknown type %s", typeURL)
	}
	out := make([]*discovery.Resource, 0, len(msgs))
	for _, m := range msgs {
		a := &anypb.Any{}
		if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
			return nil, err
		}
		out = append(out, &discovery.Resource{Name: resourceName(m), Resource: a})
	}
	return out, nil
}

func resourceName(m proto.Message) string {
	switch r := m.(type) {
	case *cluster.Cluster:
		return r.Name
	case *listener.Listener:
		return r.Name
	case *endpoint.ClusterLoadAssignment:
		return r.ClusterName
	case *route.RouteConfiguration:
		return r.Name
	}
	return ""
}

type testEnv struct {
	server *Server
	gen    *fakeGenerator
	reg    *prometheus.Registry
	// addr is the server's loopback address (newTCPTestEnv only).
	addr string
	// target and dialOpts reach the server with a gRPC client.
	target   string
	dialOpts []grpc.DialOption
}

// newTestEnv runs a server on an in-memory gRPC listener (bufconn): real
// gRPC over a connection that needs no network, so the test can run in a
// synctest bubble, where debounce windows and waits for the absence of a
// response take no real time.
func newTestEnv(t *testing.T, configure func(*Options)) *testEnv {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	env := startTestEnv(t, lis, configure)
	env.target = "passthrough:///bufconn"
	env.dialOpts = []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
	}
	return env
}

// newTCPTestEnv runs a server on loopback TCP, for clients that need an
// address (a proxyless gRPC bootstrap).
func newTCPTestEnv(t *testing.T, configure func(*Options)) *testEnv {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	env := startTestEnv(t, lis, configure)
	env.addr = lis.Addr().String()
	env.target = env.addr
	env.dialOpts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	return env
}

func startTestEnv(t *testing.T, lis net.Listener, configure func(*Options)) *testEnv {
	t.Helper()
	env := &testEnv{gen: &fakeGenerator{}, reg: prometheus.NewRegistry()}
	opts := Options{
		Generator:     env.gen,
		DebounceAfter: testDebounce,
		DebounceMax:   time.Second,
		Registry:      env.reg,
	}
	if configure != nil {
		configure(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	env.server = s
	gs := grpc.NewServer()
	s.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		_ = s.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		gs.Stop()
		<-runDone
	})
	return env
}

// adsClient is a real gRPC ADS client.
type adsClient struct {
	t      *testing.T
	stream discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	cancel context.CancelFunc
	resps  chan *discovery.DiscoveryResponse
	errs   chan error
	node   *core.Node
	sent   bool
}

func (env *testEnv) connect(t *testing.T, nodeID string) *adsClient {
	t.Helper()
	return env.connectWith(t, nodeID)
}

// connectWith is connect with the stream's metadata (key, value pairs).
func (env *testEnv) connectWith(t *testing.T, nodeID string, kv ...string) *adsClient {
	t.Helper()
	conn, err := grpc.NewClient(env.target, env.dialOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if len(kv) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	}
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := structpb.NewStruct(map[string]any{"NAMESPACE": "demo", "LABELS": map[string]any{"app": "client"}})
	c := &adsClient{
		t: t, stream: stream, cancel: cancel,
		resps: make(chan *discovery.DiscoveryResponse, 100),
		errs:  make(chan error, 1),
		node:  &core.Node{Id: nodeID, Cluster: "client.demo", Metadata: md},
	}
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				c.errs <- err
				return
			}
			c.resps <- r
		}
	}()
	return c
}

// request sends a DiscoveryRequest; the node goes with the first only, as
// Envoy does with set_node_on_first_message_only.
func (c *adsClient) request(typeURL string, names []string, version, nonce string) {
	c.t.Helper()
	req := &discovery.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: names, VersionInfo: version, ResponseNonce: nonce}
	if !c.sent {
		req.Node, c.sent = c.node, true
	}
	if err := c.stream.Send(req); err != nil {
		c.t.Fatalf("send %s: %v", typeLabel(typeURL), err)
	}
}

func ackOf(r *discovery.DiscoveryResponse) *discovery.DiscoveryRequest {
	return &discovery.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce}
}

func (c *adsClient) ack(r *discovery.DiscoveryResponse, names []string) {
	c.t.Helper()
	c.request(r.TypeUrl, names, r.VersionInfo, r.Nonce)
}

func (c *adsClient) nack(r *discovery.DiscoveryResponse, names []string, previousVersion, msg string) {
	c.t.Helper()
	req := &discovery.DiscoveryRequest{TypeUrl: r.TypeUrl, ResourceNames: names, VersionInfo: previousVersion, ResponseNonce: r.Nonce,
		ErrorDetail: &status.Status{Code: int32(codes.InvalidArgument), Message: msg}}
	if err := c.stream.Send(req); err != nil {
		c.t.Fatalf("send nack: %v", err)
	}
}

// expect waits for the next response and checks its type.
func (c *adsClient) expect(typeURL string) *discovery.DiscoveryResponse {
	c.t.Helper()
	select {
	case r := <-c.resps:
		if r.TypeUrl != typeURL {
			c.t.Fatalf("got a %s response, want %s", typeLabel(r.TypeUrl), typeLabel(typeURL))
		}
		return r
	case err := <-c.errs:
		c.t.Fatalf("stream ended waiting for %s: %v", typeLabel(typeURL), err)
	case <-time.After(waitFor):
		c.t.Fatalf("no %s response within %v", typeLabel(typeURL), waitFor)
	}
	return nil
}

// expectNone checks that nothing arrives for d. Absence can only be checked
// over an interval; d is kept short.
func (c *adsClient) expectNone(d time.Duration) {
	c.t.Helper()
	select {
	case r := <-c.resps:
		c.t.Fatalf("unexpected %s response version %s", typeLabel(r.TypeUrl), r.VersionInfo)
	case err := <-c.errs:
		c.t.Fatalf("stream ended: %v", err)
	case <-time.After(d):
	}
}

func (c *adsClient) expectError() error {
	c.t.Helper()
	select {
	case r := <-c.resps:
		c.t.Fatalf("unexpected %s response, want the stream to fail", typeLabel(r.TypeUrl))
	case err := <-c.errs:
		return err
	case <-time.After(waitFor):
		c.t.Fatal("stream did not fail")
	}
	return nil
}

// subscribeAll runs Envoy's start-up: CDS, EDS for the clusters, LDS, RDS
// for the listeners' routes, each ACKed.
func (c *adsClient) subscribeAll() map[string]*discovery.DiscoveryResponse {
	c.t.Helper()
	got := map[string]*discovery.DiscoveryResponse{}
	for _, sub := range []struct {
		typeURL string
		names   []string
	}{{xdsapi.ClusterType, nil}, {xdsapi.EndpointType, []string{"c1"}}, {xdsapi.ListenerType, nil}, {xdsapi.RouteType, []string{"80"}}} {
		c.request(sub.typeURL, sub.names, "", "")
		r := c.expect(sub.typeURL)
		c.ack(r, sub.names)
		got[sub.typeURL] = r
	}
	return got
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (env *testEnv) watched(t *testing.T, typeURL string) debugapi.WatchedStatus {
	t.Helper()
	cons := env.server.Connections()
	if len(cons) != 1 {
		t.Fatalf("%d connections, want 1", len(cons))
	}
	for _, w := range cons[0].Watched {
		if w.TypeURL == typeURL {
			return w
		}
	}
	t.Fatalf("connection does not watch %s", typeLabel(typeURL))
	return debugapi.WatchedStatus{}
}

// metricValue returns the value of a counter or gauge in reg, 0 if absent.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

func TestInitialFlowAndACK(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newTestEnv(t, nil)
		c := env.connect(t, testNodeID)

		c.request(xdsapi.ClusterType, nil, "", "")
		cds := c.expect(xdsapi.ClusterType)
		if len(cds.Resources) != 1 || cds.VersionInfo == "" || cds.Nonce == "" {
			t.Fatalf("CDS response = %v", cds)
		}
		var cl cluster.Cluster
		if err := cds.Resources[0].UnmarshalTo(&cl); err != nil || cl.Name != "c1" {
			t.Fatalf("CDS resource = %v, %v", &cl, err)
		}
		c.ack(cds, nil)

		c.request(xdsapi.EndpointType, []string{"c1", "c2"}, "", "")
		eds := c.expect(xdsapi.EndpointType)
		if len(eds.Resources) != 2 {
			t.Fatalf("EDS has %d resources, want one per requested name", len(eds.Resources))
		}
		c.ack(eds, []string{"c1", "c2"})

		c.request(xdsapi.ListenerType, nil, "", "")
		lds := c.expect(xdsapi.ListenerType)
		c.ack(lds, nil)

		c.request(xdsapi.RouteType, []string{"80"}, "", "")
		rds := c.expect(xdsapi.RouteType)
		c.ack(rds, []string{"80"})

		// ACKs are not answered.
		c.expectNone(quietInterval)
		nonces := map[string]bool{}
		for _, r := range []*discovery.DiscoveryResponse{cds, eds, lds, rds} {
			if nonces[r.Nonce] {
				t.Fatalf("nonce %s reused", r.Nonce)
			}
			nonces[r.Nonce] = true
			w := env.watched(t, r.TypeUrl)
			if w.VersionSent != r.VersionInfo || w.VersionAcked != r.VersionInfo || w.NonceAcked != r.Nonce {
				t.Errorf("%s: watched %+v, want sent = acked = %s", typeLabel(r.TypeUrl), w, r.VersionInfo)
			}
		}

		cons := env.server.Connections()
		if cons[0].ProxyID != testNodeID || cons[0].IP != "10.1.0.2" {
			t.Errorf("connection = %+v", cons[0])
		}
		if got := metricValue(t, env.reg, "pilot_xds", nil); got != 1 {
			t.Errorf("pilot_xds = %v, want 1", got)
		}
		if got := metricValue(t, env.reg, "pilot_xds_pushes", map[string]string{"type": "cds"}); got != 1 {
			t.Errorf("pilot_xds_pushes{type=cds} = %v, want 1", got)
		}
	})
}

func TestNACKRecordedNotResent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newTestEnv(t, nil)
		c := env.connect(t, testNodeID)
		c.request(xdsapi.ClusterType, nil, "", "")
		first := c.expect(xdsapi.ClusterType)
		c.ack(first, nil)

		env.gen.bump()
		env.server.ConfigUpdate(&proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.ConfigUpdate}})
		second := c.expect(xdsapi.ClusterType)
		c.nack(second, nil, first.VersionInfo, "cluster c1: bad config")

		eventually(t, "NACK recorded", func() bool { return env.watched(t, xdsapi.ClusterType).NackError != "" })
		w := env.watched(t, xdsapi.ClusterType)
		if w.NackError != "cluster c1: bad config" || w.NonceNacked != second.Nonce || w.VersionAcked != first.VersionInfo {
			t.Errorf("after NACK watched = %+v", w)
		}
		if got := metricValue(t, env.reg, "pilot_total_xds_rejects", map[string]string{"type": "cds"}); got != 1 {
			t.Errorf("pilot_total_xds_rejects{type=cds} = %v, want 1", got)
		}
		sz := env.server.SyncStatuses()
		if len(sz) != 1 || len(sz[0].Types) != 1 || sz[0].Types[0].LastNack == "" || sz[0].Types[0].Synced {
			t.Errorf("syncz = %+v, want the NACK and not synced", sz)
		}
		// No resend loop: the NACK is not answered.
		c.expectNone(quietInterval)

		// A later good push that is ACKed clears the NACK.
		env.gen.bump()
		env.server.ConfigUpdate(&proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.ConfigUpdate}})
		third := c.expect(xdsapi.ClusterType)
		c.ack(third, nil)
		eventually(t, "ACK recorded", func() bool { return env.watched(t, xdsapi.ClusterType).VersionAcked == third.VersionInfo })
		if w := env.watched(t, xdsapi.ClusterType); w.NackError != "" {
			t.Errorf("NACK not cleared by ACK: %+v", w)
		}
	})
}

func TestStaleNonceIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newTestEnv(t, nil)
		c := env.connect(t, testNodeID)
		c.request(xdsapi.ClusterType, nil, "", "")
		c.ack(c.expect(xdsapi.ClusterType), nil)
		c.request(xdsapi.EndpointType, []string{"a"}, "", "")
		first := c.expect(xdsapi.EndpointType)

		env.gen.bump()
		env.server.ConfigUpdate(&proxypush.PushRequest{Full: false, Reason: []proxypush.TriggerReason{proxypush.EndpointUpdate}})
		second := c.expect(xdsapi.EndpointType)

		// An ACK of the first nonce, with new names, arrives after the second
		// response was sent: stale, so neither recorded nor answered.
		c.ack(first, []string{"a", "b"})
		c.expectNone(quietInterval)
		if w := env.watched(t, xdsapi.EndpointType); w.VersionAcked != "" || !slices.Equal(w.ResourceNames, []string{"a"}) {
			t.Errorf("stale ACK changed state: %+v", w)
		}
		// The same change with the current nonce is answered.
		c.ack(second, []string{"a", "b"})
		third := c.expect(xdsapi.EndpointType)
		if len(third.Resources) != 2 {
			t.Fatalf("EDS for [a b] has %d resources", len(third.Resources))
		}
		if w := env.watched(t, xdsapi.EndpointType); w.VersionAcked != second.VersionInfo {
			t.Errorf("ACK of the current nonce not recorded: %+v", w)
		}
	})
}

func TestFullPushAfterConfigUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newTestEnv(t, nil)
		c := env.connect(t, testNodeID)
		initial := c.subscribeAll()

		env.gen.bump()
		start := time.Now()
		env.server.ConfigUpdate(&proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.ConfigUpdate}})
		var version string
		for _, typeURL := range pushOrder { // CDS, EDS, LDS, RDS
			r := c.expect(typeURL)
			if r.VersionInfo == initial[typeURL].VersionInfo {
				t.Errorf("%s version not changed by the push: %s", typeLabel(typeURL), r.VersionInfo)
			}
			if version != "" && r.VersionInfo != version {
				t.Errorf("%s version %s, want the push's version %s", typeLabel(typeURL), r.VersionInfo, version)
			}
			version = r.VersionInfo
		}
		if took := time.Since(start); took < testDebounce || took > testDebounce+2*time.Second {
			t.Errorf("push arrived after %v, want after the debounce %v and soon after", took, testDebounce)
		}
		c.expectNone(quietInterval)

		// Nothing changed: a full push sends nothing.
		env.server.ConfigUpdate(&proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.GlobalUpdate}})
		c.expectNone(testDebounce + quietInterval)
	})
}

func TestEDSOnlyPush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newTestEnv(t, nil)
		c := env.connect(t, testNodeID)
		c.subscribeAll()
		env.gen.bump() // every type's resources change, but only EDS may be sent
		env.server.ConfigUpdate(&proxypush.PushRequest{Full: false, Reason: []proxypush.TriggerReason{proxypush.EndpointUpdate}})
		r := c.expect(xdsapi.EndpointType)
		c.ack(r, []string{"c1"})
		c.expectNone(testDebounce + quietInterval)
	})
}

// TestEDSOnlyPushSendsNameTable: an endpoints-only push also sends a
// changed NDS name table, because a headless service's name resolves to
// its endpoints; the other types wait for a full push.
func TestEDSOnlyPushSendsNameTable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newTestEnv(t, nil)
		c := env.connect(t, testNodeID)
		c.request(xdsapi.ClusterType, nil, "", "")
		c.ack(c.expect(xdsapi.ClusterType), nil)
		c.request(nds.TypeURL, nil, "", "")
		c.ack(c.expect(nds.TypeURL), nil)
		env.gen.bump()
		env.server.ConfigUpdate(&proxypush.PushRequest{Full: false, Reason: []proxypush.TriggerReason{proxypush.EndpointUpdate}})
		c.ack(c.expect(nds.TypeURL), nil)
		c.expectNone(testDebounce + quietInterval)
	})
}

func TestReconnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newTestEnv(t, nil)
		c := env.connect(t, testNodeID)
		c.request(xdsapi.ClusterType, nil, "", "")
		old := c.expect(xdsapi.ClusterType)
		c.ack(old, nil)
		eventually(t, "one connection", func() bool { return len(env.server.Connections()) == 1 })
		c.cancel()
		eventually(t, "connection closed", func() bool { return len(env.server.Connections()) == 0 })
		if got := metricValue(t, env.reg, "pilot_xds", nil); got != 0 {
			t.Errorf("pilot_xds after close = %v, want 0", got)
		}

		// Envoy reconnects with the version it has and no nonce: answered.
		c2 := env.connect(t, testNodeID)
		c2.request(xdsapi.ClusterType, nil, old.VersionInfo, "")
		r := c2.expect(xdsapi.ClusterType)
		if r.Nonce == old.Nonce {
			t.Errorf("nonce %s reused across connections", r.Nonce)
		}
		c2.ack(r, nil)
		cons := env.server.Connections()
		if len(cons) != 1 || cons[0].ProxyID != testNodeID {
			t.Fatalf("connections after reconnect = %+v", cons)
		}
	})
}

func TestInitConnectionHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		denied := errors.New("not in the mesh")
		var (
			mu       sync.Mutex
			resolved *proxypush.Proxy
		)
		env := newTestEnv(t, func(o *Options) {
			o.ResolveProxy = func(p *proxypush.Proxy) error {
				if p.IP == "10.9.9.9" {
					return errors.New("no WorkloadEntry with address 10.9.9.9")
				}
				p.Metadata["RESOLVED"] = "yes"
				mu.Lock()
				resolved = p
				mu.Unlock()
				return nil
			}
			o.Authorize = func(p *proxypush.Proxy) error {
				if p.PodName == "intruder" {
					return denied
				}
				return nil
			}
		})
		tests := []struct {
			nodeID string
			code   codes.Code
		}{
			{"bogus", codes.InvalidArgument},
			{"", codes.InvalidArgument},
			{"sidecar~10.9.9.9~x.demo~demo.svc.cluster.local", codes.FailedPrecondition},
			{"sidecar~10.1.0.3~intruder.demo~demo.svc.cluster.local", codes.PermissionDenied},
		}
		for _, tt := range tests {
			c := env.connect(t, tt.nodeID)
			c.request(xdsapi.ClusterType, nil, "", "")
			if err := c.expectError(); grpcstatus.Code(err) != tt.code {
				t.Errorf("node %q: error %v, want code %v", tt.nodeID, err, tt.code)
			}
		}
		if n := len(env.server.Connections()); n != 0 {
			t.Fatalf("%d rejected connections registered", n)
		}

		c := env.connect(t, testNodeID)
		c.request(xdsapi.ClusterType, nil, "", "")
		c.expect(xdsapi.ClusterType)
		mu.Lock()
		defer mu.Unlock()
		if resolved == nil || resolved.Metadata["NAMESPACE"] != "demo" || resolved.Metadata["LABELS"] != `{"app":"client"}` || resolved.Metadata["RESOLVED"] != "yes" {
			t.Fatalf("resolved proxy = %+v", resolved)
		}
	})
}

func TestDebugHandlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newTestEnv(t, nil)
		c := env.connect(t, testNodeID)
		resps := c.subscribeAll()
		eventually(t, "RDS ACK", func() bool { return env.watched(t, xdsapi.RouteType).VersionAcked != "" })

		mux := http.NewServeMux()
		env.server.RegisterDebugHandlers(mux)
		srv := httptest.NewServer(mux)
		defer srv.Close()

		var cons []debugapi.ConnectionStatus
		getJSON(t, srv.URL+"/debug/connections", &cons)
		if len(cons) != 1 || cons[0].ProxyID != testNodeID || cons[0].IP != "10.1.0.2" || cons[0].ConnectedAt.IsZero() || len(cons[0].Watched) != 4 {
			t.Fatalf("/debug/connections = %+v", cons)
		}
		for i, w := range cons[0].Watched {
			if w.TypeURL != pushOrder[i] || w.VersionAcked != resps[w.TypeURL].VersionInfo {
				t.Errorf("watched[%d] = %+v", i, w)
			}
		}
		var sz []debugapi.SyncStatus
		getJSON(t, srv.URL+"/debug/syncz", &sz)
		if len(sz) != 1 || len(sz[0].Types) != 4 {
			t.Fatalf("/debug/syncz = %+v", sz)
		}
		for _, ts := range sz[0].Types {
			if !ts.Synced || ts.Sent != ts.Acked {
				t.Errorf("syncz %s = %+v, want synced", ts.Type, ts)
			}
		}
	})
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %s %s", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

func TestOptionsValidate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gen := &fakeGenerator{}
		for _, o := range []Options{
			{},
			{Generator: gen, DebounceAfter: -1},
			{Generator: gen, DebounceMax: -1},
			{Generator: gen, PushThrottle: -1},
		} {
			if _, err := New(o); err == nil {
				t.Errorf("New(%+v) accepted invalid options", o)
			}
		}
	})
}
