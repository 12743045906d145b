package kube

import (
	"testing"
	"time"
)

// TestNextGatewayAPIStatus: a condition keeps its lastTransitionTime while
// its status stays, gets the time of writing when it changes; another
// controller's route parents are kept; a status already right is not
// written.
func TestNextGatewayAPIStatus(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const old, stamp = "2020-01-01T00:00:00Z", "2026-01-02T03:04:05Z"
	cond := func(typ, status, ltt string) map[string]any {
		c := map[string]any{"type": typ, "status": status, "reason": "R", "message": "m", "observedGeneration": int64(1)}
		if ltt != "" {
			c["lastTransitionTime"] = ltt
		}
		return c
	}
	parent := func(controller string, conds ...any) any {
		return map[string]any{"controllerName": controller, "parentRef": map[string]any{"name": "gw"}, "conditions": conds}
	}
	tests := []struct {
		name      string
		kind      string
		cur, want map[string]any
		write     bool
		check     func(t *testing.T, next map[string]any)
	}{{
		name:  "same status: nothing to write",
		kind:  "Gateway",
		cur:   map[string]any{"conditions": []any{cond("Accepted", "True", old)}},
		want:  map[string]any{"conditions": []any{cond("Accepted", "True", "")}},
		write: false,
	}, {
		name:  "status changed: stamped now",
		kind:  "Gateway",
		cur:   map[string]any{"conditions": []any{cond("Accepted", "False", old)}},
		want:  map[string]any{"conditions": []any{cond("Accepted", "True", "")}},
		write: true,
		check: func(t *testing.T, next map[string]any) {
			if got := next["conditions"].([]any)[0].(map[string]any)["lastTransitionTime"]; got != stamp {
				t.Errorf("lastTransitionTime %v, want %s", got, stamp)
			}
		},
	}, {
		name:  "listener conditions keep theirs",
		kind:  "Gateway",
		cur:   map[string]any{"listeners": []any{map[string]any{"name": "http", "attachedRoutes": int64(0), "conditions": []any{cond("Accepted", "True", old)}}}},
		want:  map[string]any{"listeners": []any{map[string]any{"name": "http", "attachedRoutes": int64(1), "conditions": []any{cond("Accepted", "True", "")}}}},
		write: true,
		check: func(t *testing.T, next map[string]any) {
			l := next["listeners"].([]any)[0].(map[string]any)
			if got := l["conditions"].([]any)[0].(map[string]any)["lastTransitionTime"]; got != old {
				t.Errorf("lastTransitionTime %v, want %s kept", got, old)
			}
		},
	}, {
		name:  "route: other controllers' parents kept",
		kind:  "HTTPRoute",
		cur:   map[string]any{"parents": []any{parent("example.com/other", cond("Accepted", "True", old))}},
		want:  map[string]any{"parents": []any{parent("istio.io/gateway-controller", cond("Accepted", "True", ""))}},
		write: true,
		check: func(t *testing.T, next map[string]any) {
			ps := next["parents"].([]any)
			if len(ps) != 2 || ps[0].(map[string]any)["controllerName"] != "example.com/other" {
				t.Errorf("parents %v", ps)
			}
		},
	}, {
		name:  "route: ours already right",
		kind:  "HTTPRoute",
		cur:   map[string]any{"parents": []any{parent("example.com/other"), parent("istio.io/gateway-controller", cond("Accepted", "True", old))}},
		want:  map[string]any{"parents": []any{parent("istio.io/gateway-controller", cond("Accepted", "True", ""))}},
		write: false,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next, write := nextGatewayAPIStatus(tc.kind, tc.cur, tc.want, now)
			if write != tc.write {
				t.Fatalf("write %v, want %v (next %v)", write, tc.write, next)
			}
			if tc.check != nil {
				tc.check(t, next)
			}
		})
	}
}
