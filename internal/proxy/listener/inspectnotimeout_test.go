package listener

import (
	"crypto/tls"
	"testing"
	"time"
)

// A listener_filters_timeout of 0 means no timeout: the inspector waits for
// a ClientHello that comes after a pause.
func TestInspectWithoutTimeout(t *testing.T) {
	client, server := tcpPair(t)
	go func() {
		time.Sleep(20 * time.Millisecond)                                                               // the client is slow to speak
		tc := tls.Client(client, &tls.Config{ServerName: "late.example.com", InsecureSkipVerify: true}) //nolint:gosec // test peer
		_ = tc.Handshake()                                                                              // fails when the test closes the pair
	}()
	_, in, ok := inspectTLS(server, 0, false)
	if !ok || in.sni != "late.example.com" || in.transport != transportTLS {
		t.Fatalf("inspection without a timeout = %+v, %v; want SNI late.example.com, tls", in, ok)
	}
}
