package hcm

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/types/known/durationpb"
)

// slowBackend serves /hang (never answers until the request is cancelled,
// then counts the cancellation), /stall (a header and a first byte, then
// nothing), /drip (a byte every 100 ms, 10 of them or ?n=) and /late
// (answers after 800 ms or ?after=).
func slowBackend(t *testing.T, cancelled *atomic.Int32) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hang":
			<-r.Context().Done()
			cancelled.Add(1)
		case "/stall":
			w.Write([]byte("x"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			cancelled.Add(1)
		case "/drip":
			n, err := strconv.Atoi(r.URL.Query().Get("n"))
			if err != nil {
				n = 10
			}
			for range n {
				w.Write([]byte("d"))
				w.(http.Flusher).Flush()
				time.Sleep(100 * time.Millisecond)
			}
		case "/late":
			after, err := time.ParseDuration(r.URL.Query().Get("after"))
			if err != nil {
				after = 800 * time.Millisecond
			}
			time.Sleep(after)
			w.Write([]byte("late"))
		}
	}))
	t.Cleanup(s.Close)
	return s.Listener.Addr().String()
}

// trackedH2C is an h2c client that records whether the server closed its
// connection.
type trackedH2C struct {
	*http.Client
	closed chan struct{} // closed once a read on the connection fails
}

func newTrackedH2C() *trackedH2C {
	tc := &trackedH2C{closed: make(chan struct{})}
	tc.Client = &http.Client{Timeout: 10 * time.Second, Transport: &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &watchedConn{Conn: c, closed: tc.closed}, nil
		},
	}}
	return tc
}

type watchedConn struct {
	net.Conn
	closed chan struct{}
	once   atomic.Bool
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && c.once.CompareAndSwap(false, true) {
		close(c.closed)
	}
	return n, err
}

func TestH2StreamIdleTimeout(t *testing.T) {
	var cancelled atomic.Int32
	be := slowBackend(t, &cancelled)
	// The idle timeout is ten times the backend's gap between bytes on
	// /drip: a goroutine of a -race run on a loaded machine can stall for
	// a few hundred ms, which a 300 ms timeout against 100 ms gaps did not
	// survive.
	const idle = time.Second
	routes := []*routev3.Route{
		prefixRoute("/late", "be"),
		prefixRoute("/", "be"),
	}
	// /late's route has an idle_timeout of its own, longer than the HCM's.
	routes[0].GetRoute().IdleTimeout = durationpb.New(10 * time.Second)
	addr := startH2Proxy(t, CodecStrait, routes, func(h *hcmv3.HttpConnectionManager) {
		h.StreamIdleTimeout = durationpb.New(idle)
	}, staticCluster("be", be))
	client := h2cClient()

	t.Run("no response: 408", func(t *testing.T) {
		start := time.Now()
		resp, err := client.Get("http://" + addr + "/hang")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || resp.Header.Get("X-Strait-Response-Flags") != "SI" || string(body) != "stream timeout" {
			t.Fatalf("got %d %q flags %q, want 408 \"stream timeout\" with flag SI", resp.StatusCode, body, resp.Header.Get("X-Strait-Response-Flags"))
		}
		if el := time.Since(start); el < idle {
			t.Fatalf("answered after %v, before the stream idle timeout %v", el, idle)
		}
		if !waitFor(func() bool { return cancelled.Load() >= 1 }) {
			t.Fatal("the upstream request was not cancelled after the stream idle timeout")
		}
	})
	t.Run("response started: reset", func(t *testing.T) {
		before := cancelled.Load()
		resp, err := client.Get("http://" + addr + "/stall")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatalf("read %q to a clean end, want the stream reset after the stream idle timeout", body)
		}
		if !waitFor(func() bool { return cancelled.Load() > before }) {
			t.Fatal("the upstream request was not cancelled")
		}
	})
	t.Run("activity keeps the stream", func(t *testing.T) {
		// 20 bytes 100 ms apart: the stream lives twice its idle timeout.
		resp, err := client.Get("http://" + addr + "/drip?n=20")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != strings.Repeat("d", 20) {
			t.Fatalf("got %q, %v; want 20 bytes, a stream with traffic every 100 ms outliving its %v idle timeout", body, err, idle)
		}
	})
	t.Run("route idle_timeout", func(t *testing.T) {
		// Twice the HCM's stream_idle_timeout, well inside the route's.
		resp, err := client.Get("http://" + addr + "/late?after=2s")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != "late" {
			t.Fatalf("got %d %q; want the answer after 2 s under the route's 10 s idle_timeout", resp.StatusCode, body)
		}
	})
}

func TestH2ConnectionTimeouts(t *testing.T) {
	var cancelled atomic.Int32
	be := slowBackend(t, &cancelled)
	t.Run("idle_timeout", func(t *testing.T) {
		const idle = 300 * time.Millisecond
		addr := startH2Proxy(t, CodecStrait, []*routev3.Route{prefixRoute("/", "be")}, func(h *hcmv3.HttpConnectionManager) {
			h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(idle)}
		}, staticCluster("be", be))
		client := newTrackedH2C()
		start := time.Now()
		resp, err := client.Get("http://" + addr + "/drip")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || len(body) != 10 {
			t.Fatalf("got %q, %v: a stream in progress must not be cut by the connection's idle_timeout", body, err)
		}
		if el := time.Since(start); el < 900*time.Millisecond {
			t.Fatalf("a 1 s response ended after %v", el)
		}
		select {
		case <-client.closed:
		case <-time.After(10 * time.Second):
			t.Fatal("an idle HTTP/2 connection was not closed at its idle_timeout")
		}
	})
	t.Run("max_connection_duration", func(t *testing.T) {
		const max = 300 * time.Millisecond
		addr := startH2Proxy(t, CodecStrait, []*routev3.Route{prefixRoute("/", "be")}, func(h *hcmv3.HttpConnectionManager) {
			h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{MaxConnectionDuration: durationpb.New(max)}
		}, staticCluster("be", be))
		client := newTrackedH2C()
		start := time.Now()
		// A stream in progress when the duration passes still completes
		// (GOAWAY lets it finish); then the connection closes.
		resp, err := client.Get("http://" + addr + "/late")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != "late" {
			t.Fatalf("the stream in progress at max_connection_duration got %q, %v; want it completed", body, err)
		}
		select {
		case <-client.closed:
		case <-time.After(10 * time.Second):
			t.Fatal("the HTTP/2 connection was not closed after max_connection_duration")
		}
		if el := time.Since(start); el < max {
			t.Fatalf("closed after %v, before max_connection_duration %v", el, max)
		}
	})
}
