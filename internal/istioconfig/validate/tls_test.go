package validate_test

import "testing"

// TestValidateClientTLS: a DestinationRule's tls at every level (top,
// port-level, subset, subset port-level) follows Istio's rules for SIMPLE
// and MUTUAL.
func TestValidateClientTLS(t *testing.T) {
	runValidation(t, []validationCase{
		{"SIMPLE with a CA and SANs", dr("  host: api.example.com\n  trafficPolicy:\n    tls: {mode: SIMPLE, caCertificates: /etc/ca.pem, subjectAltNames: [api.example.com], sni: api.example.com}\n"), nil},
		{"MUTUAL with certificate and key", dr("  host: api.example.com\n  trafficPolicy:\n    tls: {mode: MUTUAL, clientCertificate: /c.pem, privateKey: /k.pem}\n"), nil},
		{"MUTUAL without certificate and key", dr("  host: api.example.com\n  trafficPolicy:\n    tls: {mode: MUTUAL}\n"),
			[]string{"spec.trafficPolicy.tls.clientCertificate: is required for mode MUTUAL", "spec.trafficPolicy.tls.privateKey: is required for mode MUTUAL"}},
		{"MUTUAL port-level without key", dr("  host: api.example.com\n  trafficPolicy:\n    portLevelSettings:\n    - port: {number: 443}\n      tls: {mode: MUTUAL, clientCertificate: /c.pem}\n"),
			[]string{"spec.trafficPolicy.portLevelSettings[0].tls.privateKey: is required"}},
		{"MUTUAL in a subset without certificate", dr("  host: api.example.com\n  subsets:\n  - name: v1\n    labels: {v: \"1\"}\n    trafficPolicy:\n      tls: {mode: MUTUAL, privateKey: /k.pem}\n"),
			[]string{"spec.subsets[0].trafficPolicy.tls.clientCertificate: is required"}},
		{"subset port-level", dr("  host: api.example.com\n  subsets:\n  - name: v1\n    labels: {v: \"1\"}\n    trafficPolicy:\n      portLevelSettings:\n      - port: {number: 443}\n        tls: {mode: SIMPLE, privateKey: /k.pem}\n"),
			[]string{"spec.subsets[0].trafficPolicy.portLevelSettings[0].tls.mode: SIMPLE sends no client certificate"}},
		{"insecureSkipVerify with a CA and SANs", dr("  host: api.example.com\n  trafficPolicy:\n    tls: {mode: SIMPLE, insecureSkipVerify: true, caCertificates: /ca.pem, subjectAltNames: [x]}\n"),
			[]string{"spec.trafficPolicy.tls.caCertificates: cannot be set when insecureSkipVerify", "spec.trafficPolicy.tls.subjectAltNames: cannot be set when insecureSkipVerify"}},
		{"insecureSkipVerify alone", dr("  host: api.example.com\n  trafficPolicy:\n    tls: {mode: SIMPLE, insecureSkipVerify: true}\n"), nil},
		{"a path with the resource separator", dr("  host: api.example.com\n  trafficPolicy:\n    tls: {mode: MUTUAL, clientCertificate: /a~b.pem, privateKey: /k.pem, caCertificates: /c~a.pem}\n"),
			[]string{"spec.trafficPolicy.tls.clientCertificate: \"/a~b.pem\" contains \"~\"", "spec.trafficPolicy.tls.caCertificates: \"/c~a.pem\" contains \"~\""}},
	})
}
