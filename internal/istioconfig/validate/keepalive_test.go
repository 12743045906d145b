package validate_test

import "testing"

// TestValidateHTTP2KeepAlive: http2KeepAlive needs both interval and
// timeout, as Istio requires, at every level of a DestinationRule.
func TestValidateHTTP2KeepAlive(t *testing.T) {
	runValidation(t, []validationCase{
		{"interval and timeout", dr("  host: api.example.com\n  trafficPolicy:\n    connectionPool:\n      http:\n        http2KeepAlive: {interval: 15s, timeout: 5s}\n"), nil},
		{"no timeout", dr("  host: api.example.com\n  trafficPolicy:\n    connectionPool:\n      http:\n        http2KeepAlive: {interval: 15s}\n"),
			[]string{"spec.trafficPolicy.connectionPool.http.http2KeepAlive.timeout: is required"}},
		{"port-level without interval", dr("  host: api.example.com\n  trafficPolicy:\n    portLevelSettings:\n    - port: {number: 443}\n      connectionPool:\n        http:\n          http2KeepAlive: {timeout: 5s}\n"),
			[]string{"spec.trafficPolicy.portLevelSettings[0].connectionPool.http.http2KeepAlive.interval: is required"}},
		{"subset without both", dr("  host: api.example.com\n  subsets:\n  - name: v1\n    labels: {v: \"1\"}\n    trafficPolicy:\n      connectionPool:\n        http:\n          http2KeepAlive: {}\n"),
			[]string{"spec.subsets[0].trafficPolicy.connectionPool.http.http2KeepAlive.interval: is required", "spec.subsets[0].trafficPolicy.connectionPool.http.http2KeepAlive.timeout: is required"}},
	})
}
