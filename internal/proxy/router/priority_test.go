package router

import (
	"slices"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	previouspriorities "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func retryPriority(name string, freq int32) *routev3.RetryPolicy_RetryPriority {
	a, err := anypb.New(&previouspriorities.PreviousPrioritiesConfig{UpdateFrequency: freq})
	if err != nil {
		panic(err)
	}
	return &routev3.RetryPolicy_RetryPriority{Name: name, ConfigType: &routev3.RetryPolicy_RetryPriority_TypedConfig{TypedConfig: a}}
}

// previous_priorities: every update_frequency attempts, the priorities
// attempted so far are excluded (Envoy's PreviousPrioritiesRetryPriority).
func TestPreviousPriorities(t *testing.T) {
	p := mustPolicy(t, &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(5),
		RetryPriority: retryPriority("envoy.retry_priorities.previous_priorities", 2)})
	if p.PriorityUpdateFrequency != 2 {
		t.Fatalf("update frequency %d", p.PriorityUpdateFrequency)
	}
	r, _ := NewRetry(p, nil, 0)
	for i, c := range []struct {
		last uint32
		want []uint32
	}{
		{0, nil},         // one attempt: the load is unmodified
		{0, []uint32{0}}, // two: priority 0 excluded
		{1, []uint32{0}}, // three: unchanged until the fourth
		{1, []uint32{0, 1}},
		{2, []uint32{0, 1}},
		{2, []uint32{0, 1, 2}},
	} {
		if got := r.ExcludedPriorities(c.last); !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("attempt %d (priority %d): excluded %v, want %v", i+1, c.last, got, c.want)
		}
	}
	// Without the retry priority nothing is excluded.
	r, _ = NewRetry(mustPolicy(t, &routev3.RetryPolicy{RetryOn: "5xx"}), nil, 0)
	for range 4 {
		if got := r.ExcludedPriorities(0); got != nil {
			t.Fatalf("no retry priority: excluded %v", got)
		}
	}
}

func TestRetryPriorityRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		rp   *routev3.RetryPolicy_RetryPriority
		want string
	}{
		{"other name", retryPriority("envoy.retry_priorities.other", 2), `retry_priority "envoy.retry_priorities.other" is not supported`},
		{"zero frequency", retryPriority("envoy.retry_priorities.previous_priorities", 0), "update_frequency 0 must be above 0"},
		{"no config", &routev3.RetryPolicy_RetryPriority{Name: "envoy.retry_priorities.previous_priorities"}, "typed_config must be a envoy.extensions.retry.priority.previous_priorities.v3.PreviousPrioritiesConfig"},
	} {
		_, err := CompileRetryPolicy(&routev3.RetryPolicy{RetryOn: "5xx", RetryPriority: c.rp})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}
