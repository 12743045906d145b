package dns

import (
	"context"
	"net"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/straitmesh/strait/internal/model"
	"github.com/straitmesh/strait/internal/nds"
	"github.com/straitmesh/strait/internal/xds"
)

// TestWatch runs Watch against straitd's xDS server: tables arrive, a
// push replaces them, a table that does not decode is NACKed and the
// stream goes on.
func TestWatch(t *testing.T) {
	var current atomic.Pointer[[]byte]
	var sawCapture atomic.Bool
	set := func(b []byte) { current.Store(&b) }
	set(nds.Marshal(nds.NameTable{"a.example.com": {IPs: []string{"240.240.0.1"}}}))
	gen := xds.GeneratorFunc(func(p *model.Proxy, typeURL string, _ []string, _ *model.PushRequest) ([]*discovery.Resource, error) {
		if p.Metadata["DNS_CAPTURE"] == "true" {
			sawCapture.Store(true)
		}
		return []*discovery.Resource{{Resource: &anypb.Any{TypeUrl: typeURL, Value: *current.Load()}}}, nil
	})
	srv, err := xds.New(xds.Options{Generator: gen, DebounceAfter: time.Millisecond, DebounceMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	srv.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.Serve(lis)
	defer g.Stop()
	go srv.Run(ctx)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()

	md, _ := structpb.NewStruct(map[string]any{"DNS_CAPTURE": "true"})
	updates := make(chan nds.NameTable, 10)
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, WatchOptions{
			Client: discovery.NewAggregatedDiscoveryServiceClient(cc),
			Node:   &core.Node{Id: "sidecar~10.1.0.2~app-1.demo~demo.svc.cluster.local", Metadata: md},
			Update: func(nt nds.NameTable) { updates <- nt },
		})
	}()
	next := func() nds.NameTable {
		t.Helper()
		select {
		case nt := <-updates:
			return nt
		case <-time.After(30 * time.Second):
			t.Fatal("no name table")
			return nil
		}
	}
	if got := next(); !reflect.DeepEqual(got, nds.NameTable{"a.example.com": {IPs: []string{"240.240.0.1"}}}) {
		t.Errorf("first table %v", got)
	}
	if !sawCapture.Load() {
		t.Error("the node metadata did not reach the server")
	}
	set([]byte{0xff}) // not a NameTable
	srv.ConfigUpdate(&model.PushRequest{Full: true})
	want := nds.NameTable{"b.example.com": {IPs: []string{"240.240.0.2"}}}
	// Only after the bad table was sent (or skipped as unchanged): the
	// next table must still arrive on the same stream.
	time.Sleep(50 * time.Millisecond)
	set(nds.Marshal(want))
	srv.ConfigUpdate(&model.PushRequest{Full: true})
	if got := next(); !reflect.DeepEqual(got, want) {
		t.Errorf("after a bad table: %v, want %v", got, want)
	}
	select {
	case nt := <-updates:
		t.Errorf("unexpected update %v", nt)
	default:
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Watch: %v", err)
	}
}

func TestDecodeResponse(t *testing.T) {
	good := nds.Marshal(nds.NameTable{"a.example.com": {IPs: []string{"240.240.0.1"}}})
	if _, err := decodeResponse(&discovery.DiscoveryResponse{TypeUrl: "x"}); err == nil {
		t.Error("wrong response type: no error")
	}
	if _, err := decodeResponse(&discovery.DiscoveryResponse{TypeUrl: nds.TypeURL, Resources: []*anypb.Any{{TypeUrl: "x", Value: good}}}); err == nil {
		t.Error("wrong resource type: no error")
	}
	if _, err := decodeResponse(&discovery.DiscoveryResponse{TypeUrl: nds.TypeURL, Resources: []*anypb.Any{{TypeUrl: nds.TypeURL, Value: []byte{0xff}}}}); err == nil {
		t.Error("bad table: no error")
	}
	nt, err := decodeResponse(&discovery.DiscoveryResponse{TypeUrl: nds.TypeURL})
	if err != nil || nt == nil || len(nt) != 0 {
		t.Errorf("empty response: %v, %v; want an empty table", nt, err)
	}
}

func TestWatchNeedsOptions(t *testing.T) {
	update := func(nds.NameTable) {}
	client := discovery.NewAggregatedDiscoveryServiceClient(nil)
	for name, o := range map[string]WatchOptions{
		"no client": {Node: &core.Node{}, Update: update},
		"no node":   {Client: client, Update: update},
		"no update": {Client: client, Node: &core.Node{}},
	} {
		if err := Watch(context.Background(), o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
