package cluster

import (
	"net/netip"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

func budgetThresholds(rb *clusterv3.CircuitBreakers_Thresholds_RetryBudget) *clusterv3.CircuitBreakers {
	return &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
		MaxRetries:  wrapperspb.UInt32(100), // ignored when there is a budget
		RetryBudget: rb,
	}}}
}

// TestRetryBudgetBoundsRetries: with a retry budget, the retries in
// flight are bounded by max(min_retry_concurrency, budget_percent % of
// the active requests), not by max_retries.
func TestRetryBudgetBoundsRetries(t *testing.T) {
	c := staticCluster(t, 1, func(c *clusterv3.Cluster) {
		c.CircuitBreakers = budgetThresholds(&clusterv3.CircuitBreakers_Thresholds_RetryBudget{
			BudgetPercent:       &typev3.Percent{Value: 50},
			MinRetryConcurrency: wrapperspb.UInt32(1),
		})
	})
	// No active request: the minimum, one retry.
	if !c.BeginRetry() {
		t.Fatal("first retry refused, want min_retry_concurrency 1 to admit it")
	}
	if c.BeginRetry() {
		t.Fatal("second retry admitted with no active request, want min_retry_concurrency 1 to refuse it")
	}
	if got := c.Stats.Counter("upstream_rq_retry_overflow").Load(); got != 1 {
		t.Errorf("upstream_rq_retry_overflow = %d, want 1", got)
	}
	// Six active requests: 50 % allows three retries in flight.
	var eps []Endpoint
	for range 6 {
		ep, err := c.PickRequest(netip.AddrPort{}, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		eps = append(eps, ep)
	}
	for i := 2; i <= 3; i++ {
		if !c.BeginRetry() {
			t.Fatalf("retry %d refused with 6 active requests, want 3 admitted", i)
		}
	}
	if c.BeginRetry() {
		t.Fatal("fourth retry admitted with 6 active requests at 50 %")
	}
	// Requests end: the budget shrinks back to the minimum.
	for _, ep := range eps {
		c.Finish(ep)
	}
	c.EndRetry()
	c.EndRetry()
	if c.BeginRetry() {
		t.Fatal("retry admitted beyond the minimum after the requests ended")
	}
	c.EndRetry()
	if !c.BeginRetry() {
		t.Fatal("retry refused after every retry ended")
	}
}

func TestRetryBudgetConfig(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rb       *clusterv3.CircuitBreakers_Thresholds_RetryBudget
		wantErr  string
		wantPct  float64
		wantMinC int64
	}{
		{"defaults", &clusterv3.CircuitBreakers_Thresholds_RetryBudget{}, "", 20, 3},
		{"set", &clusterv3.CircuitBreakers_Thresholds_RetryBudget{BudgetPercent: &typev3.Percent{Value: 25}, MinRetryConcurrency: wrapperspb.UInt32(5)}, "", 25, 5},
		{"budget_interval", &clusterv3.CircuitBreakers_Thresholds_RetryBudget{BudgetInterval: durationpb.New(1)},
			"circuit_breakers.thresholds[0].retry_budget.budget_interval is not supported", 0, 0},
		{"percent over 100", &clusterv3.CircuitBreakers_Thresholds_RetryBudget{BudgetPercent: &typev3.Percent{Value: 101}},
			"retry_budget.budget_percent 101 is out of range", 0, 0},
	} {
		cfg := &clusterv3.Cluster{Name: "c", CircuitBreakers: budgetThresholds(tc.rb)}
		b, err := parseBreaker(cfg, stats.New().Cluster("c"))
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case b.budget == nil || b.budget.percent != tc.wantPct || b.budget.minConcurrency != tc.wantMinC:
			t.Errorf("%s: budget %+v, want %v %% min %d", tc.name, b.budget, tc.wantPct, tc.wantMinC)
		}
	}
}
