package listener

import (
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// listener_filters_timeout: 0 and positive durations are taken, a
// negative or malformed one is refused by name.
func TestListenerFiltersTimeoutRange(t *testing.T) {
	for _, tc := range []struct {
		d    *durationpb.Duration
		want time.Duration
		ok   bool
	}{
		{durationpb.New(0), 0, true},
		{durationpb.New(3 * time.Second), 3 * time.Second, true},
		{durationpb.New(-time.Second), 0, false},
		{&durationpb.Duration{Seconds: 1, Nanos: -5}, 0, false},
	} {
		l, err := Build(&listenerv3.Listener{Name: "lft", Address: addr("127.0.0.1:1"), ListenerFiltersTimeout: tc.d,
			FilterChains: []*listenerv3.FilterChain{namedChain(t, "c", nil)}}, Deps{Stats: stats.New()})
		switch {
		case tc.ok && err != nil:
			t.Errorf("listener_filters_timeout %v: %v", tc.d, err)
		case tc.ok && l.FiltersTimeout != tc.want:
			t.Errorf("listener_filters_timeout %v: FiltersTimeout %v, want %v", tc.d, l.FiltersTimeout, tc.want)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "listener_filters_timeout")):
			t.Errorf("listener_filters_timeout %v: error %v, want one naming the field", tc.d, err)
		}
	}
}
