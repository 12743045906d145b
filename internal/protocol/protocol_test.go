package protocol

import (
	"slices"
	"testing"
)

func TestForPort(t *testing.T) {
	tests := []struct {
		explicit, name string
		want           Protocol
		http           bool
	}{
		{"HTTP", "x", HTTP, true},
		{"http2", "", HTTP2, true},
		{"", "http", HTTP, true},
		{"", "http-web", HTTP, true},
		{"", "HTTP2-x", HTTP2, true},
		{"", "grpc", GRPC, true},
		{"", "grpc-api", GRPC, true},
		{"", "grpc-web", GRPCWeb, true},
		{"", "grpc-web-ui", GRPCWeb, true},
		{"", "grpc-webx", GRPC, true}, // the prefix before the first '-'
		{"", "tcp-db", TCP, false},
		{"", "tls", TLS, false},
		{"", "https", HTTPS, false},
		{"", "mysql", MySQL, false},
		{"", "httpfoo", TCP, false},
		{"", "", TCP, false},
		{"TCP", "http", TCP, false},
	}
	for _, tt := range tests {
		got := ForPort(tt.explicit, tt.name)
		if got != tt.want || got.IsHTTP() != tt.http {
			t.Errorf("ForPort(%q, %q) = %q (http %v), want %q (http %v)", tt.explicit, tt.name, got, got.IsHTTP(), tt.want, tt.http)
		}
	}
}

func TestFromAppProtocol(t *testing.T) {
	tests := []struct {
		in   string
		want Protocol
		ok   bool
	}{
		{"http", HTTP, true},
		{"GRPC", GRPC, true},
		{"kubernetes.io/h2c", HTTP2, true},
		{"kubernetes.io/ws", HTTP, true},
		{"kubernetes.io/wss", HTTPS, true},
		{"example.com/custom", "", false},
	}
	for _, tt := range tests {
		if got, ok := FromAppProtocol(tt.in); got != tt.want || ok != tt.ok {
			t.Errorf("FromAppProtocol(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	// A Kubernetes appProtocol name is not a port name prefix.
	if got := FromPortName("kubernetes.io/h2c"); got != TCP {
		t.Errorf("FromPortName(kubernetes.io/h2c) = %q, want TCP", got)
	}
}

func TestParseAndNames(t *testing.T) {
	for _, n := range Names() {
		if p, ok := Parse(n); !ok || string(p) != n {
			t.Errorf("Parse(%q) = %q, %v", n, p, ok)
		}
	}
	if _, ok := Parse("SCTP"); ok {
		t.Error("Parse(SCTP) accepted")
	}
	want := []string{"GRPC", "GRPC-WEB", "HTTP", "HTTP2", "HTTPS", "MONGO", "MYSQL", "REDIS", "TCP", "TLS", "UDP"}
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}
}
