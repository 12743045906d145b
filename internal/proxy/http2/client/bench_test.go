package client

import (
	"io"
	"net"
	"net/http"
	"testing"

	"golang.org/x/net/http2"

	"github.com/straitmesh/strait/internal/proxy/wbatch"
)

// BenchmarkRoundTrip compares this client with x/net/http2's Transport
// (b.RunParallel: concurrent streams on one connection) against the same
// x/net server answering 1 KiB, with the header fields a proxied request
// carries (x-request-id new on each).
func BenchmarkRoundTrip(b *testing.B) {
	body := make([]byte, 1024)
	addr := xnetServer(b, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(body)
	}), &http2.Server{MaxConcurrentStreams: 1000})
	type rt interface {
		RoundTrip(*http.Request) (*http.Response, error)
	}
	run := func(b *testing.B, c rt) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			n := 0
			for pb.Next() {
				n++
				req, _ := http.NewRequest("GET", "http://backend/bench", nil)
				req.Header.Set("User-Agent", "bench")
				req.Header.Set("X-Forwarded-Proto", "http")
				req.Header.Set("X-Request-Id", "0123456789abcdef"+string(rune('a'+n%26)))
				resp, err := c.RoundTrip(req)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	b.Run("framed", func(b *testing.B) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		c, err := New(wbatch.New(nc), Config{})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		run(b, c)
	})
	b.Run("xnet", func(b *testing.B) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		c, err := (&http2.Transport{AllowHTTP: true, DisableCompression: true}).NewClientConn(wbatch.New(nc))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		run(b, c)
	})
}
