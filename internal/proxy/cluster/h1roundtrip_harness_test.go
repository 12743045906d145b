package cluster

// The harness of the HTTP/1.1 round trip tests (h1roundtrip_test.go):
// a raw upstream on loopback, a cluster built as the manager builds it,
// and waits that fail instead of hanging.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// rawBackend is an HTTP/1.1 upstream on loopback that serves each
// connection it accepts with serve (n counts the connections from 1),
// and counts the connections it accepted and those still open.
type rawBackend struct {
	addr           string
	accepted, open atomic.Int64
}

func newRawBackend(t *testing.T, serve func(n int, c net.Conn, br *bufio.Reader)) *rawBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &rawBackend{addr: ln.Addr().String()}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := int(b.accepted.Add(1))
			b.open.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer b.open.Add(-1)
				defer c.Close()
				serve(n, c, bufio.NewReader(c))
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return b
}

// serveAll answers every request on the connection with answer's
// response (the whole response, head and body), reading each request's
// body first; it returns when the client closes.
func serveAll(c net.Conn, br *bufio.Reader, answer func(*http.Request) string) {
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		if _, err := io.WriteString(c, answer(req)); err != nil {
			return
		}
	}
}

func okResponse(body string) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// rtCluster is a cluster built as a manager builds it (its transport
// socket, the idle watch), whose connections the test closes at its end.
func rtCluster(t *testing.T, edit func(*clusterv3.Cluster)) *Cluster {
	t.Helper()
	cfg := eds("c", "c", time.Second)
	if edit != nil {
		edit(cfg)
	}
	m := NewManager(slog.New(slog.DiscardHandler), stats.New())
	c, err := m.build(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.h1.closeIdle(true)
		m.Close()
	})
	return c
}

func tcpEndpoint(addr string) Endpoint { return Endpoint{Network: "tcp", Address: addr} }

// do sends one request through c's RoundTrip and returns the response
// with its body read.
func do(t *testing.T, c *Cluster, addr, method, path string, body io.Reader) (*http.Response, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://svc"+path, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.RoundTrip(req, tcpEndpoint(addr))
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}

// idleConns is the number of idle pooled connections to addr.
func idleConns(c *Cluster, addr string) int {
	c.h1.mu.Lock()
	defer c.h1.mu.Unlock()
	return len(c.h1.idle[addr])
}

// recv receives from ch, failing the test after 10 s: a value that never
// comes is a failure, not a hung test.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the backend")
		panic("unreachable")
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
