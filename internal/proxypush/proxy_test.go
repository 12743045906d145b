package proxypush

import (
	"reflect"
	"testing"
	"time"
)

func TestParseNodeID(t *testing.T) {
	tests := []struct {
		id      string
		wantErr bool
		want    Proxy
	}{
		{id: "sidecar~10.1.0.2~client.demo~demo.svc.cluster.local", want: Proxy{Type: SidecarProxy, IP: "10.1.0.2", PodName: "client", Namespace: "demo", DNSDomain: "demo.svc.cluster.local"}},
		{id: "sidecar~10.1.0.2~client~demo.svc.cluster.local", wantErr: true},
		{id: "sidecar~10.1.0.2", wantErr: true},
		{id: "bogus~10.1.0.2~a.b~c", wantErr: true},
		{id: "sidecar~~a.b~c", wantErr: true},
	}
	for _, tt := range tests {
		p, err := ParseNodeID(tt.id)
		if (err != nil) != tt.wantErr {
			t.Fatalf("ParseNodeID(%q) err = %v, wantErr %v", tt.id, err, tt.wantErr)
		}
		if err != nil {
			continue
		}
		if p.Type != tt.want.Type || p.IP != tt.want.IP || p.PodName != tt.want.PodName || p.Namespace != tt.want.Namespace || p.DNSDomain != tt.want.DNSDomain {
			t.Errorf("ParseNodeID(%q) = %+v, want %+v", tt.id, *p, tt.want)
		}
	}
	if got := NodeID("10.1.0.2", "client", "demo", ""); got != "sidecar~10.1.0.2~client.demo~demo.svc.cluster.local" {
		t.Errorf("NodeID = %q", got)
	}
}

func TestPushRequestMerge(t *testing.T) {
	a := &PushRequest{Full: false, Reason: []TriggerReason{EndpointUpdate}, ConfigsUpdated: map[ConfigKey]struct{}{{Kind: "ServiceEntry", Name: "a"}: {}}}
	b := &PushRequest{Full: true, Reason: []TriggerReason{ConfigUpdate}, ConfigsUpdated: map[ConfigKey]struct{}{{Kind: "VirtualService", Name: "b"}: {}}}
	m := a.Merge(b)
	if !m.Full || len(m.Reason) != 2 || len(m.ConfigsUpdated) != 2 {
		t.Fatalf("merge = %+v", m)
	}
	if len(a.Reason) != 1 || len(a.ConfigsUpdated) != 1 {
		t.Fatalf("merge mutated its receiver: %+v", a)
	}
	var nilReq *PushRequest
	if nilReq.Merge(b) != b || b.Merge(nil) != b {
		t.Fatal("merge with nil should return the other request")
	}
}

func TestPushRequestMergeKeepsEarliestStart(t *testing.T) {
	t0 := time.Unix(100, 0)
	t1 := time.Unix(200, 0)
	tests := []struct {
		a, b, want time.Time
	}{
		{t0, t1, t0},
		{t1, t0, t0},
		{t0, time.Time{}, t0},
		{time.Time{}, t1, t1},
	}
	for _, tt := range tests {
		got := (&PushRequest{Start: tt.a}).Merge(&PushRequest{Start: tt.b}).Start
		if !got.Equal(tt.want) {
			t.Errorf("merge(%v, %v).Start = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestBatchMatchesMerge(t *testing.T) {
	t0 := time.Unix(100, 0)
	reqs := []*PushRequest{
		{Reason: []TriggerReason{EndpointUpdate}, Start: t0.Add(time.Second), ServicesUpdated: map[string]struct{}{"a": {}}},
		nil,
		{Full: true, Reason: []TriggerReason{ConfigUpdate}, Start: t0, ConfigsUpdated: map[ConfigKey]struct{}{{Kind: "VirtualService", Name: "v"}: {}}},
		{Reason: []TriggerReason{EndpointUpdate}, AddressesUpdated: map[string]struct{}{"10.0.0.1": {}}, ServicesUpdated: map[string]struct{}{"b": {}}},
	}
	var merged *PushRequest
	var b Batch
	for _, r := range reqs {
		merged = merged.Merge(r)
		b.Add(r)
	}
	got := b.Request()
	if got.Full != merged.Full || !got.Start.Equal(merged.Start) || !reflect.DeepEqual(got.Reason, merged.Reason) ||
		!reflect.DeepEqual(got.ConfigsUpdated, merged.ConfigsUpdated) || !reflect.DeepEqual(got.ServicesUpdated, merged.ServicesUpdated) ||
		!reflect.DeepEqual(got.AddressesUpdated, merged.AddressesUpdated) {
		t.Fatalf("batch = %+v, merge = %+v", got, merged)
	}
	if len(reqs[0].ServicesUpdated) != 1 || len(reqs[0].Reason) != 1 {
		t.Fatalf("batch modified an added request: %+v", reqs[0])
	}
	var empty Batch
	if empty.Request() != nil {
		t.Fatal("empty batch should give nil")
	}
}
