package kube

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/straitmesh/strait/internal/xdsapi"
)

// adsClient is a real gRPC ADS client that behaves like Envoy: it ACKs
// every response and, after each CDS response, subscribes EDS to the EDS
// clusters it got.
type adsClient struct {
	stream discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient

	sendMu sync.Mutex // serialises stream.Send

	mu       sync.Mutex          // guards the fields below
	subs     map[string][]string // resource names per type URL
	latest   map[string]*discovery.DiscoveryResponse
	received map[string]int // responses per type URL
	err      error          // the stream's end
	changed  chan struct{}  // signalled after every response
	nodeSent bool
	node     *core.Node
}

func dialADS(t *testing.T, addr, nodeID string) *adsClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &adsClient{
		stream: stream, subs: map[string][]string{}, latest: map[string]*discovery.DiscoveryResponse{},
		received: map[string]int{}, changed: make(chan struct{}, 1), node: &core.Node{Id: nodeID},
	}
	go c.recv()
	return c
}

func (c *adsClient) send(req *discovery.DiscoveryRequest) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if !c.nodeSent {
		req.Node, c.nodeSent = c.node, true
	}
	return c.stream.Send(req)
}

// subscribe sends a request for typeURL with names (nil: wildcard).
func (c *adsClient) subscribe(t *testing.T, typeURL string, names ...string) {
	t.Helper()
	c.mu.Lock()
	c.subs[typeURL] = names
	c.mu.Unlock()
	if err := c.send(&discovery.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: names}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
}

func (c *adsClient) recv() {
	for {
		r, err := c.stream.Recv()
		c.mu.Lock()
		if err != nil {
			c.err = err
			c.mu.Unlock()
			c.signal()
			return
		}
		c.latest[r.TypeUrl] = r
		c.received[r.TypeUrl]++
		names := c.subs[r.TypeUrl]
		var eds []string
		if r.TypeUrl == xdsapi.ClusterType {
			for _, a := range r.Resources {
				var cl cluster.Cluster
				if a.UnmarshalTo(&cl) == nil && cl.GetEdsClusterConfig() != nil {
					eds = append(eds, cl.Name)
				}
			}
		}
		edsChanged := r.TypeUrl == xdsapi.ClusterType && !slices.Equal(eds, c.subs[xdsapi.EndpointType])
		if edsChanged {
			c.subs[xdsapi.EndpointType] = eds
		}
		c.mu.Unlock()
		_ = c.send(&discovery.DiscoveryRequest{TypeUrl: r.TypeUrl, ResourceNames: names, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce})
		if edsChanged {
			_ = c.send(&discovery.DiscoveryRequest{TypeUrl: xdsapi.EndpointType, ResourceNames: eds})
		}
		c.signal()
	}
}

func (c *adsClient) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// wait polls cond after every response until it holds or timeout passes;
// it returns how long it waited.
func (c *adsClient) wait(t *testing.T, what string, timeout time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if cond() {
			return time.Since(start)
		}
		if err := c.streamErr(); err != nil {
			t.Fatalf("waiting for %s: stream ended: %v", what, err)
		}
		select {
		case <-c.changed:
		case <-deadline.C:
			if cond() {
				return time.Since(start)
			}
			t.Fatalf("waiting for %s: not within %v", what, timeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *adsClient) streamErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// counts returns how many responses of each type arrived.
func (c *adsClient) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.received {
		out[k] = v
	}
	return out
}

func (c *adsClient) latestOf(typeURL string) *discovery.DiscoveryResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.latest[typeURL]
}

// clusters returns the names of the last CDS response.
func (c *adsClient) clusters() []string {
	var out []string
	if r := c.latestOf(xdsapi.ClusterType); r != nil {
		for _, a := range r.Resources {
			var cl cluster.Cluster
			if a.UnmarshalTo(&cl) == nil {
				out = append(out, cl.Name)
			}
		}
	}
	return out
}

// endpoints returns the sorted "IP:port" endpoints of a cluster in the
// last EDS response, and whether the cluster was in it.
func (c *adsClient) endpoints(name string) ([]string, bool) {
	r := c.latestOf(xdsapi.EndpointType)
	if r == nil {
		return nil, false
	}
	for _, a := range r.Resources {
		var cla endpoint.ClusterLoadAssignment
		if a.UnmarshalTo(&cla) != nil || cla.ClusterName != name {
			continue
		}
		var out []string
		for _, l := range cla.Endpoints {
			for _, e := range l.LbEndpoints {
				sa := e.GetEndpoint().GetAddress().GetSocketAddress()
				out = append(out, sa.GetAddress()+":"+strconv.FormatUint(uint64(sa.GetPortValue()), 10))
			}
		}
		slices.Sort(out)
		return out, true
	}
	return nil, false
}

// routeConfig returns a route configuration of the last RDS response.
func (c *adsClient) routeConfig(name string) *route.RouteConfiguration {
	r := c.latestOf(xdsapi.RouteType)
	if r == nil {
		return nil
	}
	for _, a := range r.Resources {
		var rc route.RouteConfiguration
		if a.UnmarshalTo(&rc) == nil && rc.Name == name {
			return &rc
		}
	}
	return nil
}

// resources returns the serialized resources of the last response of a
// type, to compare two clients.
func (c *adsClient) resources(typeURL string) [][]byte {
	r := c.latestOf(typeURL)
	if r == nil {
		return nil
	}
	var out [][]byte
	for _, a := range r.Resources {
		out = append(out, a.Value)
	}
	return out
}
