package kube

import (
	"reflect"
	"time"

	"github.com/straitmesh/strait/internal/registry/kube/gatewayapi"
)

// nextGatewayAPIStatus decides what to write on a Gateway API object's
// status: cur is its status now, want the status straitd computed (its
// conditions without lastTransitionTime). A GatewayClass's and a
// Gateway's status are ours whole; of a route's status.parents only the
// entries of our controllerName are, the other controllers' are kept.
// A condition keeps the lastTransitionTime it has on the object while
// its status is the same, else gets now. It returns false when the
// object already says it all (so a rebuild writes nothing).
func nextGatewayAPIStatus(kind string, cur, want map[string]any, now time.Time) (map[string]any, bool) {
	stamp := now.UTC().Format(time.RFC3339)
	next := deepCopyMap(want)
	switch kind {
	case "HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute":
		curParents, _ := cur["parents"].([]any)
		var kept []any
		for _, p := range curParents {
			pm, _ := p.(map[string]any)
			if pm["controllerName"] != string(gatewayapi.ControllerName) {
				kept = append(kept, p)
			}
		}
		wantParents, _ := next["parents"].([]any)
		for _, p := range wantParents {
			pm, _ := p.(map[string]any)
			stampConditions(pm, matching(curParents, func(c map[string]any) bool {
				return c["controllerName"] == pm["controllerName"] && reflect.DeepEqual(c["parentRef"], pm["parentRef"])
			}), stamp)
		}
		next["parents"] = append(kept, wantParents...)
		for k, v := range cur {
			if k != "parents" {
				next[k] = v
			}
		}
	default:
		stampConditions(next, cur, stamp)
		curListeners, _ := cur["listeners"].([]any)
		wantListeners, _ := next["listeners"].([]any)
		for _, l := range wantListeners {
			lm, _ := l.(map[string]any)
			stampConditions(lm, matching(curListeners, func(c map[string]any) bool { return c["name"] == lm["name"] }), stamp)
		}
	}
	if reflect.DeepEqual(pruneEmpty(next), pruneEmpty(cur)) {
		return nil, false
	}
	return next, true
}

// matching is the first element of list that ok accepts (nil: none).
func matching(list []any, ok func(map[string]any) bool) map[string]any {
	for _, e := range list {
		if m, _ := e.(map[string]any); m != nil && ok(m) {
			return m
		}
	}
	return nil
}

// stampConditions sets the lastTransitionTime of want's conditions: the
// one of cur's condition of the same type and status, else stamp.
func stampConditions(want, cur map[string]any, stamp string) {
	wc, _ := want["conditions"].([]any)
	cc, _ := cur["conditions"].([]any)
	for _, c := range wc {
		m, _ := c.(map[string]any)
		if m == nil {
			continue
		}
		m["lastTransitionTime"] = stamp
		if old := matching(cc, func(o map[string]any) bool { return o["type"] == m["type"] && o["status"] == m["status"] }); old != nil {
			if t, ok := old["lastTransitionTime"].(string); ok {
				m["lastTransitionTime"] = t
			}
		}
	}
}

func deepCopyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = deepCopyValue(v)
	}
	return out
}

func deepCopyValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return deepCopyMap(t)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = deepCopyValue(e)
		}
		return out
	}
	return v
}
