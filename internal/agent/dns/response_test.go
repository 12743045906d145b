package dns

import (
	"reflect"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/nds"
)

func TestDecodeResponse(t *testing.T) {
	a := nds.NameTable{"a.example.com": {IPs: []string{"240.240.0.1"}}}
	b := nds.NameTable{"b.example.com": {IPs: []string{"240.240.0.2"}}}
	if _, err := DecodeResponse(&discovery.DiscoveryResponse{TypeUrl: "x"}); err == nil {
		t.Error("wrong response type: no error")
	}
	if _, err := DecodeResponse(&discovery.DiscoveryResponse{TypeUrl: nds.TypeURL, Resources: []*anypb.Any{{TypeUrl: "x", Value: nds.Marshal(a)}}}); err == nil {
		t.Error("wrong resource type: no error")
	}
	if _, err := DecodeResponse(&discovery.DiscoveryResponse{TypeUrl: nds.TypeURL, Resources: []*anypb.Any{{TypeUrl: nds.TypeURL, Value: []byte{0xff}}}}); err == nil {
		t.Error("bad table: no error")
	}
	nt, err := DecodeResponse(&discovery.DiscoveryResponse{TypeUrl: nds.TypeURL})
	if err != nil || nt == nil || len(nt) != 0 {
		t.Errorf("empty response: %v, %v; want an empty table", nt, err)
	}
	nt, err = DecodeResponse(&discovery.DiscoveryResponse{TypeUrl: nds.TypeURL, Resources: []*anypb.Any{
		{TypeUrl: nds.TypeURL, Value: nds.Marshal(a)}, {TypeUrl: nds.TypeURL, Value: nds.Marshal(b)},
	}})
	want := nds.NameTable{"a.example.com": a["a.example.com"], "b.example.com": b["b.example.com"]}
	if err != nil || !reflect.DeepEqual(nt, want) {
		t.Errorf("two tables: %v, %v; want merged %v", nt, err, want)
	}
}
