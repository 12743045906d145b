package xds

import (
	"context"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/straitmesh/strait/internal/xdsapi"
)

// FuzzRequest feeds arbitrary DiscoveryRequests, the server's untrusted
// input, through connection setup and request bookkeeping.
func FuzzRequest(f *testing.F) {
	md, _ := structpb.NewStruct(map[string]any{"NAMESPACE": "demo", "N": 1.5, "B": true, "L": []any{"x"}})
	for _, r := range []*discovery.DiscoveryRequest{
		{Node: &core.Node{Id: testNodeID, Metadata: md}, TypeUrl: xdsapi.ClusterType},
		{TypeUrl: xdsapi.EndpointType, ResourceNames: []string{"b", "a", "a"}, VersionInfo: "1", ResponseNonce: "x-1"},
		{TypeUrl: xdsapi.ListenerType, ResponseNonce: "x-1", ErrorDetail: &status.Status{Message: "bad"}},
	} {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, b)
	}
	f.Fuzz(func(t *testing.T, first, second []byte) {
		var r1, r2 discovery.DiscoveryRequest
		if proto.Unmarshal(first, &r1) != nil || proto.Unmarshal(second, &r2) != nil {
			return
		}
		s, err := New(Options{Generator: &fakeGenerator{}})
		if err != nil {
			t.Fatal(err)
		}
		ss := newSotwStream(s, "fuzz", nil)
		con := ss.con
		if s.initConnection(context.Background(), r1.GetNode(), con) == nil {
			if con.proxy == nil || con.id == "" {
				t.Fatal("accepted connection without a proxy")
			}
			s.closeConnection(con)
		}
		// processRequest drops requests without a type URL before this.
		if r1.GetTypeUrl() == "" || r2.GetTypeUrl() == "" {
			return
		}
		fresh := r1.GetErrorDetail() == nil
		if got := ss.shouldRespond(&r1); got != fresh {
			t.Fatalf("first request for a type: respond = %v, want %v", got, fresh)
		}
		ss.shouldRespond(&r2)
		for _, w := range con.Watched() {
			if !slicesSortedUnique(w.ResourceNames) {
				t.Fatalf("resource names not normalized: %q", w.ResourceNames)
			}
		}
	})
}

func slicesSortedUnique(xs []string) bool {
	for i := 1; i < len(xs); i++ {
		if xs[i-1] >= xs[i] {
			return false
		}
	}
	return true
}
