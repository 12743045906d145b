package forward

import (
	"net/http"
	"testing"
	"time"
)

func TestParseGRPCTimeout(t *testing.T) {
	for v, want := range map[string]time.Duration{"1S": time.Second, "250m": 250 * time.Millisecond, "3H": 3 * time.Hour, "12345678n": 12345678} {
		if d, ok := ParseGRPCTimeout(v); !ok || d != want {
			t.Errorf("ParseGRPCTimeout(%q) = %v %v", v, d, ok)
		}
	}
	for _, v := range []string{"", "S", "1", "123456789S", "1x", "-1S"} {
		if _, ok := ParseGRPCTimeout(v); ok {
			t.Errorf("ParseGRPCTimeout(%q) accepted", v)
		}
	}
}

func TestIsGRPC(t *testing.T) {
	for ct, want := range map[string]bool{"application/grpc": true, "application/grpc+proto": true, "application/grpc;x=y": true,
		"application/grpc-web": false, "text/plain": false} {
		if got := IsGRPC(http.Header{"Content-Type": {ct}}); got != want {
			t.Errorf("IsGRPC(%q) = %v", ct, got)
		}
	}
}

func TestShadowHost(t *testing.T) {
	for host, want := range map[string]string{"a.b": "a.b-shadow", "a.b:8080": "a.b-shadow:8080", "[::1]": "[::1]-shadow", "[::1]:80": "[::1]-shadow:80"} {
		if got := shadowHost(host); got != want {
			t.Errorf("shadowHost(%q) = %q, want %q", host, got, want)
		}
	}
}
