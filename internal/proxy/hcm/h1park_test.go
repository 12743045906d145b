package hcm

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/straitmesh/strait/internal/proxy/http1"
)

// These tests cover the detached parking of h1park.go on real sockets:
// a parked connection keeps a duplicate descriptor and an h1keep, and a
// new net.Conn and h1conn serve it when it wakes.

// openFDs is the number of descriptors this process has open.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("counting descriptors: %v", err)
	}
	return len(ents)
}

// liveHeap is the live heap after a full collection (twice: pooled
// buffers survive one).
func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// parkedCount is the number of connections s holds parked.
func parkedCount(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.parked
}

// rawGet sends GET path on c and returns the target the backend saw,
// reading through a tiny buffer so that the client side holds no big one.
func rawGet(c net.Conn, path string) (string, error) {
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: park\r\n\r\n", path); err != nil {
		return "", err
	}
	br := bufio.NewReaderSize(c, 16)
	resp, _, err := readResp(c, br)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	if br.Buffered() > 0 {
		return "", fmt.Errorf("%d bytes after the response", br.Buffered())
	}
	return resp.Header.Get("X-Seen-Uri"), nil
}

// TestDetachedParking parks many connections at once: each holds one
// descriptor and little memory while parked, each request after parking
// (all at once) gets its own response, and every descriptor is closed once
// the clients or a drain close the connections.
func TestDetachedParking(t *testing.T) {
	const n = 300
	for _, end := range []string{"client close", "drain"} {
		t.Run(end, func(t *testing.T) {
			d := NewDrain()
			addr, s := startParking(t, DefaultLimits(), d)
			warm, err := net.Dial("tcp", addr) // the upstream connection and its goroutines
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rawGet(warm, "/warm"); err != nil {
				t.Fatal(err)
			}
			warm.Close()
			if !waitFor(func() bool { return s.Active() == 0 }) {
				t.Fatal("the warm-up connection stayed open")
			}
			g0, fd0, heap0 := runtime.NumGoroutine(), openFDs(t), liveHeap()

			clients := make([]net.Conn, n)
			for i := range clients {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				if _, err := rawGet(c, "/first"); err != nil {
					t.Fatalf("client %d first request: %v", i, err)
				}
				clients[i] = c
			}
			if !parkedAll(g0, n/20) {
				t.Fatalf("goroutines %d with %d idle connections (started at %d): not parked", runtime.NumGoroutine(), n, g0)
			}
			// The goroutine count can fall within its slack before the last
			// few connections have parked: wait for the count itself.
			waitFor(func() bool { return parkedCount(s) == n })
			if got, parked := s.Active(), parkedCount(s); got != n || parked != n {
				t.Fatalf("Active() = %d with %d parked connections, want %d and %d", got, parked, n, n)
			}
			// Two descriptors a connection (the client's, the parked
			// duplicate), not three.
			if fds := openFDs(t); fds > fd0+2*n+8 {
				t.Fatalf("%d descriptors open with %d parked connections, from %d: want at most %d", fds, n, fd0, fd0+2*n+8)
			}
			// Both ends of a connection in this process: the client's
			// net.Conn and the parked one (about 2 KiB together). A parked connection
			// that kept its h1conn, net.Conn and wrappers costs several
			// KiB (about 10 KiB together).
			perConn := (int64(liveHeap()) - int64(heap0)) / n
			t.Logf("live heap per connection (client and parked server side): %d bytes", perConn)
			if perConn > 3072 {
				t.Fatalf("live heap %d bytes a parked connection (with its client), want at most 3072", perConn)
			}

			// Every connection asks at once; each gets its own answer.
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i, c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					want := fmt.Sprintf("/again/%d", i)
					got, err := rawGet(c, want)
					if err == nil && got != want {
						err = fmt.Errorf("got the response to %q", got)
					}
					if err != nil {
						errs <- fmt.Errorf("client %d after parking: %w", i, err)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			// Parked again (the goroutines now include the upstream
			// connections' that the concurrent requests opened), then
			// closed by the client or by the drain.
			if !waitFor(func() bool { return parkedCount(s) == n }) {
				t.Fatalf("%d of %d connections parked again after their second request", parkedCount(s), n)
			}
			// Now with an upstream connection for each concurrent request.
			fdParked := openFDs(t)
			switch end {
			case "client close":
				for _, c := range clients {
					c.Close()
				}
			case "drain":
				d.Start()
				for i, c := range clients {
					if !closedSoon(c) {
						t.Fatalf("the drain did not close parked connection %d", i)
					}
					c.Close()
				}
			}
			if !waitFor(func() bool { return s.Active() == 0 }) {
				t.Fatalf("Active() = %d after every connection closed, want 0", s.Active())
			}
			if !waitFor(func() bool { return openFDs(t) <= fdParked-2*n }) {
				t.Fatalf("%d descriptors open after every connection closed, %d while parked: want at most %d (a parked connection's descriptor leaked)",
					openFDs(t), fdParked, fdParked-2*n)
			}
		})
	}
}

// TestDetachable: only a connection whose identity is all in its socket
// is detached when parked: plain TCP, or the HTTP/2 sniffer's replay of
// it once drained; not TLS, not a wrapper carrying state of its own.
func TestDetachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	type wrapped struct{ net.Conn }
	for _, tc := range []struct {
		name string
		conn net.Conn
		want bool
	}{
		{"plain TCP", dial(), true},
		{"sniffed, drained", &prefixConn{Conn: http1.WrapConn(dial())}, true},
		{"sniffed, bytes left", &prefixConn{Conn: http1.WrapConn(dial()), pre: []byte("GET")}, false},
		{"TLS", tls.Client(dial(), &tls.Config{InsecureSkipVerify: true}), false},
		{"TLS, sniffed", &prefixConn{Conn: tls.Client(dial(), &tls.Config{InsecureSkipVerify: true})}, false},
		{"other wrapper", wrapped{dial()}, false},
	} {
		c := &h1conn{tracked: tc.conn}
		if got := c.detachable(); got != tc.want {
			t.Errorf("%s: detachable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestParkKeepsConnectionLimits: a connection's request count and
// max_connection_duration carry over parking (the h1keep, not the
// h1conn, holds them): with max_requests_per_connection 3, the third
// request, after two parks, is answered with connection: close and the
// connection closes.
func TestParkKeepsConnectionLimits(t *testing.T) {
	lim := DefaultLimits()
	lim.MaxRequestsPerConnection = 3
	addr, s := startParking(t, lim, nil)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i := 1; i <= 3; i++ {
		if i > 1 && !waitFor(func() bool { return parkedCount(s) == 1 }) {
			t.Fatalf("not parked before request %d", i)
		}
		if _, err := fmt.Fprintf(c, "GET /%d HTTP/1.1\r\nHost: park\r\n\r\n", i); err != nil {
			t.Fatal(err)
		}
		resp, _, err := readResp(c, br)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if resp.Close != (i == 3) {
			t.Fatalf("request %d: connection: close %v, want %v", i, resp.Close, i == 3)
		}
	}
	if !closedSoon(c) {
		t.Fatal("the connection stayed open after its last request")
	}
}
