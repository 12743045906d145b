package listener

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
)

// adminDrain.covers: /drain_listeners drains every listener, or with
// inboundonly those of traffic_direction INBOUND; graceful drains without
// stopping; a listener of drain_type MODIFY_ONLY is never covered.
func TestAdminDrainCovers(t *testing.T) {
	listener := func(dir corev3.TrafficDirection, dt listenerv3.Listener_DrainType) *Listener {
		return &Listener{Config: &listenerv3.Listener{TrafficDirection: dir, DrainType: dt}}
	}
	in := listener(corev3.TrafficDirection_INBOUND, listenerv3.Listener_DEFAULT)
	out := listener(corev3.TrafficDirection_OUTBOUND, listenerv3.Listener_DEFAULT)
	unspecified := listener(corev3.TrafficDirection_UNSPECIFIED, listenerv3.Listener_DEFAULT)
	inModifyOnly := listener(corev3.TrafficDirection_INBOUND, listenerv3.Listener_MODIFY_ONLY)

	type call struct{ inboundOnly, graceful bool }
	type want struct{ drain, stop bool }
	for _, tc := range []struct {
		name  string
		calls []call
		l     *Listener
		want  want
	}{
		{"no drain", nil, in, want{false, false}},
		{"all, inbound listener", []call{{false, false}}, in, want{true, true}},
		{"all, outbound listener", []call{{false, false}}, out, want{true, true}},
		{"all graceful", []call{{false, true}}, out, want{true, false}},
		{"inbound only, inbound listener", []call{{true, false}}, in, want{true, true}},
		{"inbound only, outbound listener", []call{{true, false}}, out, want{false, false}},
		{"inbound only, no direction", []call{{true, false}}, unspecified, want{false, false}},
		{"inbound only graceful", []call{{true, true}}, in, want{true, false}},
		{"inbound graceful, then all", []call{{true, true}, {false, false}}, in, want{true, true}},
		{"all graceful, then inbound", []call{{false, true}, {true, false}}, out, want{true, false}},
		{"MODIFY_ONLY", []call{{false, false}}, inModifyOnly, want{false, false}},
		{"MODIFY_ONLY, inbound only", []call{{true, false}}, inModifyOnly, want{false, false}},
	} {
		var d adminDrain
		for _, c := range tc.calls {
			d.add(c.inboundOnly, c.graceful)
		}
		if drain, stop := d.covers(tc.l); drain != tc.want.drain || stop != tc.want.stop {
			t.Errorf("%s: covers = drain %v stop %v, want drain %v stop %v", tc.name, drain, stop, tc.want.drain, tc.want.stop)
		}
	}
}
