package xds

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestCodecRoundTripOverGRPC sends DiscoveryRequests and receives
// DiscoveryResponses of a few sizes through a real gRPC server on a
// loopback listener, created with ServerOptions(), and again with the same
// options around a codec whose pool counts its buffers: the server must
// marshal with it, and gRPC must hand every buffer back. Sizes are below
// the pooling threshold, in the tiers, and above the top tier. The server
// unmarshals requests and marshals responses with the codec; the client
// uses gRPC's.
func TestCodecRoundTripOverGRPC(t *testing.T) {
	counted := &countingPool{pool: &bufferPool{}}
	for _, server := range []struct {
		name string
		opts []grpc.ServerOption
	}{
		{"ServerOptions", ServerOptions()},
		{"counted buffers", serverOptions(&codec{pool: counted})},
	} {
		t.Run(server.name, func(t *testing.T) {
			conn := startCodecServer(t, server.opts)
			tests := []struct {
				name          string
				request, resp int // padding of the request's name, size of alt_stat_name
			}{
				{"below the pooling threshold", 10, 100},
				{"one tier", 40 << 10, 40 << 10},
				{"large request and response", 2 << 20, 2 << 20},
				{"response above the top tier", 10, 5 << 20},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) { codecRoundTrip(t, conn, tt.request, tt.resp) })
			}
		})
	}
	if counted.gets.Load() == 0 {
		t.Fatal("the server created with serverOptions did not marshal with its codec")
	}
	eventually(t, "every pooled buffer returned", func() bool { return counted.outstanding.Load() == 0 })
}

// countingPool counts the buffers gRPC may return to it: those above the
// pooling threshold (mem.NewBuffer does not pool smaller ones).
type countingPool struct {
	pool        *bufferPool
	gets        atomic.Int64
	outstanding atomic.Int64
}

func (p *countingPool) Get(size int) *[]byte {
	b := p.pool.Get(size)
	if !mem.IsBelowBufferPoolingThreshold(cap(*b)) {
		p.gets.Add(1)
		p.outstanding.Add(1)
	}
	return b
}

func (p *countingPool) Put(b *[]byte) {
	p.outstanding.Add(-1)
	p.pool.Put(b)
}

// startCodecServer serves ADS with opts on a loopback listener, with a
// generator that answers a cluster name "<n>-<padding>" with that cluster
// and an alt_stat_name of n bytes, and returns a client connection to it.
func startCodecServer(t *testing.T, opts []grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	gen := GeneratorFunc(func(_ *proxypush.Proxy, typeURL string, watched []string, _ *proxypush.PushRequest) ([]*discovery.Resource, error) {
		var out []*discovery.Resource
		for _, name := range watched {
			n, err := strconv.Atoi(strings.SplitN(name, "-", 2)[0])
			if err != nil {
				return nil, fmt.Errorf("resource name %.20q: want <size>-<padding>", name)
			}
			a, err := anypb.New(&cluster.Cluster{Name: name, AltStatName: strings.Repeat("s", n)})
			if err != nil {
				return nil, err
			}
			out = append(out, &discovery.Resource{Name: name, Resource: a})
		}
		return out, nil
	})
	s, err := New(Options{Generator: gen})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(opts...)
	s.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// codecRoundTrip asks for a cluster whose name is about request bytes long
// and whose alt_stat_name is resp bytes, and checks the answer.
func codecRoundTrip(t *testing.T, conn *grpc.ClientConn, request, resp int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	name := strconv.Itoa(resp) + "-" + strings.Repeat("p", request)
	if err := stream.Send(&discovery.DiscoveryRequest{Node: &core.Node{Id: testNodeID}, TypeUrl: xdsapi.ClusterType, ResourceNames: []string{name}}); err != nil {
		t.Fatal(err)
	}
	r, err := stream.Recv()
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if r.TypeUrl != xdsapi.ClusterType || r.Nonce == "" || len(r.Resources) != 1 {
		t.Fatalf("response type %s nonce %q with %d resources", r.TypeUrl, r.Nonce, len(r.Resources))
	}
	var cl cluster.Cluster
	if err := r.Resources[0].UnmarshalTo(&cl); err != nil {
		t.Fatal(err)
	}
	want := &cluster.Cluster{Name: name, AltStatName: strings.Repeat("s", resp)}
	if !proto.Equal(&cl, want) {
		t.Errorf("cluster name %d bytes, alt_stat_name %d bytes; want %d and %d", len(cl.Name), len(cl.AltStatName), len(name), resp)
	}
}

// responseOfSize returns a DiscoveryResponse of about size bytes on the
// wire, in resources of at most 1 KiB, like a push of small
// ClusterLoadAssignments.
func responseOfSize(size int) *discovery.DiscoveryResponse {
	r := &discovery.DiscoveryResponse{VersionInfo: "1", TypeUrl: xdsapi.EndpointType, Nonce: "n-1"}
	for size > 0 {
		n := min(size, 1<<10)
		r.Resources = append(r.Resources, &anypb.Any{TypeUrl: xdsapi.EndpointType, Value: []byte(strings.Repeat("e", n))})
		size -= n
	}
	return r
}

// TestCodecMarshal checks the bytes, the buffer tier and the unmarshalled
// message for messages of several sizes, with the data in one buffer and
// split across several (as gRPC hands over a message read in frames).
func TestCodecMarshal(t *testing.T) {
	c := newCodec()
	tests := []struct {
		size    int
		wantCap int // capacity of the marshalled buffer; 0: not checked (not pooled)
	}{
		{size: 0},
		{size: 500},
		{size: 3 << 10, wantCap: 4 << 10},
		{size: 40 << 10, wantCap: 64 << 10},
		{size: 300 << 10, wantCap: 512 << 10},
		{size: 3 << 20, wantCap: 4 << 20},
		{size: 5 << 20, wantCap: -1}, // exact
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.size), func(t *testing.T) {
			msg := responseOfSize(tt.size)
			want, err := proto.Marshal(msg)
			if err != nil {
				t.Fatal(err)
			}
			data, err := c.Marshal(msg)
			if err != nil {
				t.Fatal(err)
			}
			defer data.Free()
			if len(data) != 1 {
				t.Fatalf("marshalled into %d buffers, want 1", len(data))
			}
			got := data[0].ReadOnlyData()
			if string(got) != string(want) {
				t.Fatalf("marshalled %d bytes differing from proto.Marshal's %d", len(got), len(want))
			}
			switch {
			case tt.wantCap > 0 && cap(got) != tt.wantCap:
				t.Errorf("buffer capacity %d for %d bytes, want the tier %d", cap(got), len(got), tt.wantCap)
			case tt.wantCap < 0 && cap(got) != len(got):
				t.Errorf("buffer capacity %d for %d bytes above the top tier, want exact", cap(got), len(got))
			}

			for _, parts := range []int{1, 3} {
				var in mem.BufferSlice
				for i := range parts {
					in = append(in, mem.SliceBuffer(want[i*len(want)/parts:(i+1)*len(want)/parts]))
				}
				var back discovery.DiscoveryResponse
				if err := c.Unmarshal(in, &back); err != nil {
					t.Fatalf("unmarshal from %d buffers: %v", parts, err)
				}
				if !proto.Equal(&back, msg) {
					t.Errorf("unmarshal from %d buffers: message differs", parts)
				}
			}
		})
	}
}

func TestCodecErrors(t *testing.T) {
	c := newCodec()
	if _, err := c.Marshal("not a message"); err == nil {
		t.Error("Marshal of a string succeeded")
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer{0xff}}, &discovery.DiscoveryResponse{}); err == nil {
		t.Error("Unmarshal of garbage succeeded")
	}
	if err := c.Unmarshal(nil, struct{}{}); err == nil {
		t.Error("Unmarshal into a struct succeeded")
	}
	if c.Name() != "proto" {
		t.Errorf("Name() = %q, want proto: the codec replaces gRPC's for the default content-subtype", c.Name())
	}
}

// TestBufferPoolTiers checks that the pool hands out buffers of the
// smallest power-of-two tier that holds the size (256 B to 4 MiB), exact
// ones above, and that Put keeps only buffers of a tier's capacity.
// sync.Pool may drop anything put, so reuse itself is not asserted.
func TestBufferPoolTiers(t *testing.T) {
	tests := []struct {
		size, wantCap int
	}{
		{0, 256},
		{1, 256},
		{256, 256},
		{257, 512},
		{1 << 10, 1 << 10},
		{1<<10 + 1, 2 << 10},
		{40 << 10, 64 << 10},
		{1 << 20, 1 << 20},
		{1<<20 + 1, 2 << 20},
		{4 << 20, 4 << 20},
		{4<<20 + 1, 4<<20 + 1},
	}
	p := &bufferPool{}
	for _, tt := range tests {
		for round := range 3 {
			b := p.Get(tt.size)
			if len(*b) != tt.size || cap(*b) != tt.wantCap {
				t.Fatalf("Get(%d) round %d: len %d cap %d, want len %d cap %d", tt.size, round, len(*b), cap(*b), tt.size, tt.wantCap)
			}
			// Use the whole buffer, as the codec does, then return a
			// prefix of it, as gRPC may.
			clear(*b)
			*b = (*b)[:tt.size/2]
			p.Put(b)
		}
	}

	// Buffers not of a tier's capacity are dropped, never handed out for a
	// size they cannot hold.
	for _, c := range []int{0, 300, 1000, 3 << 20} {
		b := make([]byte, c)
		p.Put(&b)
	}
	for range 10 {
		if b := p.Get(600); cap(*b) != 1<<10 {
			t.Fatalf("Get(600) after Put of odd capacities: cap %d, want 1024", cap(*b))
		}
		if b := p.Get(3<<20 + 1); cap(*b) != 4<<20 {
			t.Fatalf("Get(3 MiB + 1) after Put of odd capacities: cap %d, want 4 MiB", cap(*b))
		}
	}
}

// BenchmarkCodecMarshal marshals a 40 KiB DiscoveryResponse with this
// package's codec and with gRPC's default one, and frees the result as gRPC
// does after writing it. gRPC's takes a 1 MiB buffer and zeroes it. Both
// reuse pooled buffers, so B/op is about the same; bufcap-B is the
// capacity of the buffer a message holds while gRPC writes it, the memory
// each response in flight pins.
func BenchmarkCodecMarshal(b *testing.B) {
	msg := responseOfSize(40 << 10)
	for _, bc := range []struct {
		name  string
		codec encoding.CodecV2
	}{
		{"codec=strait", newCodec()},
		{"codec=grpc", encoding.GetCodecV2("proto")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(proto.Size(msg)))
			for b.Loop() {
				data, err := bc.codec.Marshal(msg)
				if err != nil {
					b.Fatal(err)
				}
				data.Free()
			}
			data, err := bc.codec.Marshal(msg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(cap(data[0].ReadOnlyData())), "bufcap-B")
			data.Free()
		})
	}
}
