package xds

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// deltaClient is a real gRPC delta ADS client.
type deltaClient struct {
	t      *testing.T
	stream discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	cancel context.CancelFunc
	resps  chan *discovery.DeltaDiscoveryResponse
	errs   chan error
	node   *core.Node
	sent   bool
}

func (env *testEnv) connectDelta(t *testing.T, nodeID string) *deltaClient {
	t.Helper()
	conn, err := grpc.NewClient(env.target, env.dialOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &deltaClient{
		t: t, stream: stream, cancel: cancel,
		resps: make(chan *discovery.DeltaDiscoveryResponse, 100),
		errs:  make(chan error, 1),
		node:  &core.Node{Id: nodeID},
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

func (c *deltaClient) send(req *discovery.DeltaDiscoveryRequest) {
	c.t.Helper()
	if !c.sent {
		req.Node, c.sent = c.node, true
	}
	if err := c.stream.Send(req); err != nil {
		c.t.Fatalf("send %s: %v", typeLabel(req.TypeUrl), err)
	}
}

func (c *deltaClient) subscribe(typeURL string, names ...string) {
	c.t.Helper()
	c.send(&discovery.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: names})
}

func (c *deltaClient) ack(r *discovery.DeltaDiscoveryResponse) {
	c.t.Helper()
	c.send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
}

func (c *deltaClient) expect(typeURL string) *discovery.DeltaDiscoveryResponse {
	c.t.Helper()
	select {
	case r := <-c.resps:
		if r.TypeUrl != typeURL {
			c.t.Fatalf("got a %s response, want %s", typeLabel(r.TypeUrl), typeLabel(typeURL))
		}
		if r.Nonce == "" || r.SystemVersionInfo == "" {
			c.t.Fatalf("response without nonce or version: %v", r)
		}
		return r
	case err := <-c.errs:
		c.t.Fatalf("stream ended waiting for %s: %v", typeLabel(typeURL), err)
	case <-time.After(waitFor):
		c.t.Fatalf("no %s response within %v", typeLabel(typeURL), waitFor)
	}
	return nil
}

func (c *deltaClient) expectNone(d time.Duration) {
	c.t.Helper()
	select {
	case r := <-c.resps:
		c.t.Fatalf("unexpected %s response: %d resources, removed %q", typeLabel(r.TypeUrl), len(r.Resources), r.RemovedResources)
	case err := <-c.errs:
		c.t.Fatalf("stream ended: %v", err)
	case <-time.After(d):
	}
}

func names(r *discovery.DeltaDiscoveryResponse) []string {
	var out []string
	for _, res := range r.Resources {
		out = append(out, res.Name)
	}
	slices.Sort(out)
	return out
}

func fullPush(env *testEnv) {
	env.server.ConfigUpdate(&proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.ConfigUpdate}})
}

func TestDeltaWildcardSendsOnlyChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newTestEnv(t, nil)
		env.gen.setClusters("a", "b")
		c := env.connectDelta(t, testNodeID)

		c.subscribe(xdsapi.ClusterType) // empty first subscribe list: wildcard
		r := c.expect(xdsapi.ClusterType)
		if got := names(r); !slices.Equal(got, []string{"a", "b"}) || len(r.RemovedResources) != 0 {
			t.Fatalf("initial CDS = %v removed %v", got, r.RemovedResources)
		}
		for _, res := range r.Resources {
			var cl cluster.Cluster
			if res.Version == "" || res.Resource.UnmarshalTo(&cl) != nil || cl.Name != res.Name {
				t.Fatalf("resource %s: version %q, %v", res.Name, res.Version, &cl)
			}
		}
		c.ack(r)
		c.expectNone(quietInterval) // an ACK is not answered
		eventually(t, "ACK recorded", func() bool {
			w := env.watched(t, xdsapi.ClusterType)
			return w.VersionAcked == r.SystemVersionInfo && w.NonceAcked == r.Nonce
		})
		if cons := env.server.Connections(); !cons[0].Delta || !cons[0].Watched[0].Wildcard {
			t.Errorf("connection = %+v, want delta and wildcard", cons[0])
		}

		// Nothing changed: nothing sent.
		fullPush(env)
		c.expectNone(testDebounce + quietInterval)

		// One cluster added, one removed, one kept: only the difference is sent.
		env.gen.setClusters("b", "c")
		fullPush(env)
		r2 := c.expect(xdsapi.ClusterType)
		if got := names(r2); !slices.Equal(got, []string{"c"}) || !slices.Equal(r2.RemovedResources, []string{"a"}) {
			t.Fatalf("CDS after change = %v removed %v, want [c] removed [a]", got, r2.RemovedResources)
		}
		if r2.SystemVersionInfo == r.SystemVersionInfo || r2.Nonce == r.Nonce {
			t.Errorf("version/nonce not changed: %s/%s", r2.SystemVersionInfo, r2.Nonce)
		}
		c.ack(r2)

		// Content change: every resource changes, and is sent again.
		env.gen.bump()
		fullPush(env)
		r3 := c.expect(xdsapi.ClusterType)
		if got := names(r3); !slices.Equal(got, []string{"b", "c"}) || len(r3.RemovedResources) != 0 {
			t.Fatalf("CDS after bump = %v removed %v", got, r3.RemovedResources)
		}
	})
}

func TestDeltaNamedSubscribeUnsubscribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newTestEnv(t, nil)
		c := env.connectDelta(t, testNodeID)

		c.subscribe(xdsapi.EndpointType, "x")
		r := c.expect(xdsapi.EndpointType)
		if got := names(r); !slices.Equal(got, []string{"x"}) {
			t.Fatalf("EDS = %v, want [x]", got)
		}
		c.ack(r)

		// Subscribing to one more name sends only that one.
		c.subscribe(xdsapi.EndpointType, "y")
		r = c.expect(xdsapi.EndpointType)
		if got := names(r); !slices.Equal(got, []string{"y"}) {
			t.Fatalf("EDS after subscribing y = %v, want [y]", got)
		}
		c.ack(r)
		if w := env.watched(t, xdsapi.EndpointType); w.Wildcard || !slices.Equal(w.ResourceNames, []string{"x", "y"}) {
			t.Fatalf("watched = %+v", w)
		}

		// Unsubscribing is not answered, and x is no longer pushed.
		c.send(&discovery.DeltaDiscoveryRequest{TypeUrl: xdsapi.EndpointType, ResourceNamesUnsubscribe: []string{"x"}})
		c.expectNone(quietInterval)
		env.gen.bump()
		env.server.ConfigUpdate(&proxypush.PushRequest{Full: false, Reason: []proxypush.TriggerReason{proxypush.EndpointUpdate}})
		r = c.expect(xdsapi.EndpointType)
		if got := names(r); !slices.Equal(got, []string{"y"}) || len(r.RemovedResources) != 0 {
			t.Fatalf("EDS push after unsubscribing x = %v removed %v, want [y]", got, r.RemovedResources)
		}
		c.ack(r)

		// Unsubscribing everything: a push sends nothing.
		c.send(&discovery.DeltaDiscoveryRequest{TypeUrl: xdsapi.EndpointType, ResourceNamesUnsubscribe: []string{"y"}})
		env.gen.bump()
		env.server.ConfigUpdate(&proxypush.PushRequest{Full: false, Reason: []proxypush.TriggerReason{proxypush.EndpointUpdate}})
		c.expectNone(testDebounce + quietInterval)
	})
}

func TestDeltaNACKAndStaleNonce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newTestEnv(t, nil)
		c := env.connectDelta(t, testNodeID)
		c.subscribe(xdsapi.ClusterType)
		first := c.expect(xdsapi.ClusterType)
		c.ack(first)

		env.gen.bump()
		fullPush(env)
		second := c.expect(xdsapi.ClusterType)
		// A stale ACK (of the first nonce) is ignored.
		c.ack(first)
		c.expectNone(quietInterval)
		if w := env.watched(t, xdsapi.ClusterType); w.NonceAcked != first.Nonce {
			t.Fatalf("stale ACK recorded: %+v", w)
		}

		c.send(&discovery.DeltaDiscoveryRequest{TypeUrl: xdsapi.ClusterType, ResponseNonce: second.Nonce,
			ErrorDetail: &status.Status{Code: int32(codes.InvalidArgument), Message: "cluster c1: bad"}})
		eventually(t, "NACK recorded", func() bool { return env.watched(t, xdsapi.ClusterType).NackError != "" })
		w := env.watched(t, xdsapi.ClusterType)
		if w.NackError != "cluster c1: bad" || w.NonceNacked != second.Nonce || w.VersionAcked != first.SystemVersionInfo {
			t.Errorf("after NACK watched = %+v", w)
		}
		if got := metricValue(t, env.reg, "pilot_total_xds_rejects", map[string]string{"type": "cds"}); got != 1 {
			t.Errorf("pilot_total_xds_rejects{type=cds} = %v, want 1", got)
		}
		// No resend loop.
		c.expectNone(quietInterval)
		if sz := env.server.SyncStatuses(); sz[0].Types[0].Synced || sz[0].Types[0].LastNack == "" {
			t.Errorf("syncz after NACK = %+v", sz)
		}

		// The proxy kept the first version, so the next push sends c1 again
		// (its content changed since then); an ACK clears the NACK.
		env.gen.bump()
		fullPush(env)
		third := c.expect(xdsapi.ClusterType)
		if got := names(third); !slices.Equal(got, []string{"c1"}) {
			t.Fatalf("CDS after NACK = %v", got)
		}
		c.ack(third)
		eventually(t, "ACK after NACK", func() bool { return env.watched(t, xdsapi.ClusterType).NonceAcked == third.Nonce })
		if w := env.watched(t, xdsapi.ClusterType); w.NackError != "" {
			t.Errorf("NACK not cleared: %+v", w)
		}
	})
}

func TestDeltaReconnectWithInitialVersions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newTestEnv(t, nil)
		env.gen.setClusters("a", "b")
		c := env.connectDelta(t, testNodeID)
		c.subscribe(xdsapi.ClusterType)
		r := c.expect(xdsapi.ClusterType)
		c.ack(r)
		held := map[string]string{"gone": "v0"}
		for _, res := range r.Resources {
			held[res.Name] = res.Version
		}
		c.cancel()
		eventually(t, "connection closed", func() bool { return len(env.server.Connections()) == 0 })

		// The proxy reconnects and says what it holds: only "gone" (which no
		// longer exists) is news to it. The first response is sent anyway.
		c2 := env.connectDelta(t, testNodeID)
		c2.send(&discovery.DeltaDiscoveryRequest{TypeUrl: xdsapi.ClusterType, InitialResourceVersions: held})
		r2 := c2.expect(xdsapi.ClusterType)
		if len(r2.Resources) != 0 || !slices.Equal(r2.RemovedResources, []string{"gone"}) {
			t.Fatalf("after reconnect: %v removed %v, want nothing but [gone] removed", names(r2), r2.RemovedResources)
		}
		if r2.Nonce == r.Nonce {
			t.Errorf("nonce reused across connections")
		}
		c2.ack(r2)

		// An empty first response for a type with nothing to send.
		c2.subscribe(xdsapi.EndpointType, "x")
		c2.expect(xdsapi.EndpointType)
		c2.subscribe(xdsapi.RouteType) // wildcard RDS: the fake generator has none
		r3 := c2.expect(xdsapi.RouteType)
		if len(r3.Resources) != 0 {
			t.Fatalf("RDS = %v", names(r3))
		}
	})
}

func TestSotWRemoval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newTestEnv(t, nil)
		env.gen.setClusters("a", "b")
		c := env.connect(t, testNodeID)
		c.request(xdsapi.ClusterType, nil, "", "")
		r := c.expect(xdsapi.ClusterType)
		if len(r.Resources) != 2 {
			t.Fatalf("CDS has %d resources", len(r.Resources))
		}
		c.ack(r, nil)
		env.gen.setClusters("b")
		fullPush(env)
		r2 := c.expect(xdsapi.ClusterType)
		var cl cluster.Cluster
		if len(r2.Resources) != 1 || r2.Resources[0].UnmarshalTo(&cl) != nil || cl.Name != "b" {
			t.Fatalf("CDS after removing a: %d resources (%v)", len(r2.Resources), &cl)
		}
		if r2.VersionInfo == r.VersionInfo {
			t.Errorf("version unchanged")
		}
	})
}
