package listener

import (
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// A chain whose transport_socket_connect_timeout is unset or 0s keeps the
// default handshake bound of ten seconds; a negative one is refused.
func TestHandshakeTimeoutDefaults(t *testing.T) {
	for _, tc := range []struct {
		d    *durationpb.Duration
		want time.Duration
	}{
		{nil, 10 * time.Second},
		{durationpb.New(0), 10 * time.Second},
		{durationpb.New(time.Millisecond), time.Millisecond},
	} {
		c, err := buildChain(&listenerv3.FilterChain{Name: "x", TransportSocketConnectTimeout: tc.d, Filters: []*listenerv3.Filter{tcpProxyFilter(t)}}, Deps{Stats: stats.New()})
		if err != nil {
			t.Fatalf("transport_socket_connect_timeout %v: %v", tc.d, err)
		}
		if c.handshakeTimeout != tc.want {
			t.Errorf("transport_socket_connect_timeout %v: handshake bound %v, want %v", tc.d, c.handshakeTimeout, tc.want)
		}
	}
	if _, err := buildChain(&listenerv3.FilterChain{Name: "x", TransportSocketConnectTimeout: durationpb.New(-time.Second), Filters: []*listenerv3.Filter{tcpProxyFilter(t)}}, Deps{Stats: stats.New()}); err == nil {
		t.Error("a negative transport_socket_connect_timeout: want an error")
	}
}
