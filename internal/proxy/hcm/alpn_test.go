package hcm

import (
	"bufio"
	"crypto/tls"
	"io"
	"strings"
	"testing"
	"time"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"golang.org/x/net/http2"
)

// TestTLSProtocolFollowsALPN: under codec_type AUTO a TLS connection that
// negotiated "h2" is HTTP/2 and one that negotiated "http/1.1" is
// HTTP/1.1, whatever its first bytes are; one without ALPN is told apart
// by its first bytes, as in Envoy.
func TestTLSProtocolFollowsALPN(t *testing.T) {
	srvTLS, cliTLS := mutualTLS(t, "spiffe://cluster.local/ns/default/sa/client")
	srvTLS.ClientAuth = tls.NoClientCert
	srvTLS.NextProtos = []string{"h2", "http/1.1"}
	be := echoBackend(t)
	forEachCodec(t, func(t *testing.T, codec Codec) {
		addr := startTLSProxy(t, codec, srvTLS, func(*hcmv3.HttpConnectionManager) {}, staticCluster("be", be.Listener.Addr().String()))
		dial := func(t *testing.T, alpn ...string) *tls.Conn {
			t.Helper()
			cfg := cliTLS.Clone()
			cfg.NextProtos = alpn
			c, err := tls.Dial("tcp", addr, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if got, want := c.ConnectionState().NegotiatedProtocol, strings.Join(alpn, ""); got != want {
				t.Fatalf("ALPN %q, want %q", got, want)
			}
			return c
		}
		// speaksH2 writes the HTTP/2 preface and SETTINGS and reports
		// whether the answer starts with the server's SETTINGS frame;
		// what came otherwise is returned.
		speaksH2 := func(t *testing.T, c *tls.Conn) (bool, string) {
			t.Helper()
			if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
				t.Fatal(err)
			}
			fr := http2.NewFramer(c, c)
			if err := fr.WriteSettings(); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			head, _ := br.Peek(9)
			if len(head) == 9 && http2.FrameType(head[3]) == http2.FrameSettings {
				return true, ""
			}
			rest, _ := io.ReadAll(io.LimitReader(br, 64))
			return false, string(rest)
		}
		t.Run("h2 preface on ALPN http/1.1 is HTTP/1.1", func(t *testing.T) {
			ok, got := speaksH2(t, dial(t, "http/1.1"))
			if ok || !strings.HasPrefix(got, "HTTP/1.1 4") && !strings.HasPrefix(got, "HTTP/1.1 5") {
				t.Fatalf("answer %q (HTTP/2 %v), want an HTTP/1.1 error", got, ok)
			}
		})
		t.Run("HTTP/1.1 request on ALPN h2 is not served", func(t *testing.T) {
			c := dial(t, "h2")
			_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") // a failed write shows in what the test reads back
			got, _ := io.ReadAll(io.LimitReader(c, 4096))
			if strings.Contains(string(got), "HTTP/1.1 200") {
				t.Fatalf("an HTTP/1.1 request on an h2 connection was served: %q", got)
			}
		})
		t.Run("h2 on ALPN h2", func(t *testing.T) {
			if ok, got := speaksH2(t, dial(t, "h2")); !ok {
				t.Fatalf("answer %q, want HTTP/2 SETTINGS", got)
			}
		})
		t.Run("no ALPN: the first bytes decide", func(t *testing.T) {
			if ok, got := speaksH2(t, dial(t)); !ok {
				t.Fatalf("h2 preface without ALPN: answer %q, want HTTP/2 SETTINGS", got)
			}
			c := dial(t)
			_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") // a failed write shows in what the test reads back
			got, _ := io.ReadAll(io.LimitReader(c, 4096))
			if !strings.HasPrefix(string(got), "HTTP/1.1 200") {
				t.Fatalf("HTTP/1.1 without ALPN: %q", got)
			}
		})
	})
}
