package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/straitmesh/strait/internal/xdsapi"
)

// client is one simulated proxy: a real gRPC ADS stream that subscribes
// like Envoy (CDS, EDS of its clusters, LDS, RDS "80", or "http.80" for a
// gateway) and ACKs every response.
type client struct {
	nodeID string
	meta   map[string]any
	delta  bool
	routes []string // the RDS names it asks for: "80" (a sidecar), "http.80" (a gateway)

	mu        sync.Mutex
	started   time.Time
	types     map[string]bool // types received at least once
	syncedAt  time.Time       // all four types received
	marker    []byte          // armed: the bytes that show the change
	armedAt   time.Time
	changedAt time.Time // first response carrying marker after arming
	received  int       // responses since arming
	err       error
}

func (c *client) node() *core.Node {
	n := &core.Node{Id: c.nodeID}
	if c.meta != nil {
		n.Metadata, _ = structpb.NewStruct(c.meta)
	}
	return n
}

func (c *client) arm(marker string) {
	c.mu.Lock()
	c.marker, c.armedAt, c.changedAt, c.received = []byte(marker), time.Now(), time.Time{}, 0
	c.mu.Unlock()
}

func (c *client) observe(typeURL string, resources [][]byte) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.types[typeURL] {
		// not the first of its type
	} else {
		c.types[typeURL] = true
		if len(c.types) == 4 && c.syncedAt.IsZero() {
			c.syncedAt = now
		}
	}
	if c.marker == nil {
		return
	}
	c.received++
	if !c.changedAt.IsZero() {
		return
	}
	for _, r := range resources {
		if bytes.Contains(r, c.marker) {
			c.changedAt = now
			return
		}
	}
}

func (c *client) run(ctx context.Context, conn *grpc.ClientConn) {
	c.mu.Lock()
	c.started, c.types = time.Now(), map[string]bool{}
	c.mu.Unlock()
	var err error
	if c.delta {
		err = c.runDelta(ctx, conn)
	} else {
		err = c.runSotW(ctx, conn)
	}
	if err != nil && ctx.Err() == nil {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
	}
}

func dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(xdsapi.MaxMessageSize)))
}

func outboundNames(names []string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, "outbound|") {
			out = append(out, n)
		}
	}
	return out
}

func (c *client) runSotW(ctx context.Context, conn *grpc.ClientConn) error {
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	names := map[string][]string{xdsapi.ClusterType: nil, xdsapi.ListenerType: nil, xdsapi.RouteType: c.routes}
	if err := stream.Send(&discovery.DiscoveryRequest{Node: c.node(), TypeUrl: xdsapi.ClusterType}); err != nil {
		return err
	}
	if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: xdsapi.ListenerType}); err != nil {
		return err
	}
	subscribedEDS, subscribedRDS := false, false
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		c.observe(resp.TypeUrl, values(resp.Resources))
		if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: resp.TypeUrl, ResourceNames: names[resp.TypeUrl],
			VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}); err != nil {
			return err
		}
		switch resp.TypeUrl {
		case xdsapi.ClusterType:
			var cl []string
			for _, a := range resp.Resources {
				var x cluster.Cluster
				if a.UnmarshalTo(&x) == nil {
					cl = append(cl, x.Name)
				}
			}
			eds := outboundNames(cl)
			if !subscribedEDS || !equal(eds, names[xdsapi.EndpointType]) {
				names[xdsapi.EndpointType], subscribedEDS = eds, true
				if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: xdsapi.EndpointType, ResourceNames: eds}); err != nil {
					return err
				}
			}
		case xdsapi.ListenerType:
			if !subscribedRDS {
				subscribedRDS = true
				if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: xdsapi.RouteType, ResourceNames: names[xdsapi.RouteType]}); err != nil {
					return err
				}
			}
		}
	}
}

func (c *client) runDelta(ctx context.Context, conn *grpc.ClientConn) error {
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&discovery.DeltaDiscoveryRequest{Node: c.node(), TypeUrl: xdsapi.ClusterType}); err != nil {
		return err
	}
	if err := stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: xdsapi.ListenerType}); err != nil {
		return err
	}
	eds := map[string]bool{}
	subscribedEDS, subscribedRDS := false, false
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		vals := make([][]byte, 0, len(resp.Resources))
		var added []string
		for _, r := range resp.Resources {
			vals = append(vals, r.GetResource().GetValue())
			if resp.TypeUrl == xdsapi.ClusterType && strings.HasPrefix(r.Name, "outbound|") && !eds[r.Name] {
				eds[r.Name] = true
				added = append(added, r.Name)
			}
		}
		c.observe(resp.TypeUrl, vals)
		req := &discovery.DeltaDiscoveryRequest{TypeUrl: resp.TypeUrl, ResponseNonce: resp.Nonce}
		if err := stream.Send(req); err != nil {
			return err
		}
		switch resp.TypeUrl {
		case xdsapi.ClusterType:
			if len(added) > 0 || !subscribedEDS {
				subscribedEDS = true
				if len(added) == 0 {
					added = []string{"outbound|80||none.invalid"} // subscribe to something so EDS answers
				}
				if err := stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: xdsapi.EndpointType, ResourceNamesSubscribe: added}); err != nil {
					return err
				}
			}
		case xdsapi.ListenerType:
			if !subscribedRDS {
				subscribedRDS = true
				if err := stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: xdsapi.RouteType, ResourceNamesSubscribe: c.routes}); err != nil {
					return err
				}
			}
		}
	}
}

func values(as []*anypb.Any) [][]byte {
	out := make([][]byte, len(as))
	for i, a := range as {
		out[i] = a.GetValue()
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
