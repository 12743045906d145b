package h1

import (
	"strings"
	"testing"
)

func TestSetAttemptCount(t *testing.T) {
	head := []byte("GET / HTTP/1.1\r\nx-envoy-attempt-count: 1\r\n\r\nbody")
	at := strings.Index(string(head), ": 1") + 2
	w, end := setAttemptCount(head, at, at+1, 7)
	if string(w) != "GET / HTTP/1.1\r\nx-envoy-attempt-count: 7\r\n\r\nbody" || end != at+1 {
		t.Fatalf("same width: %q %d", w, end)
	}
	w, end = setAttemptCount(w, at, end, 12)
	if string(w) != "GET / HTTP/1.1\r\nx-envoy-attempt-count: 12\r\n\r\nbody" || end != at+2 {
		t.Fatalf("wider: %q %d", w, end)
	}
}
