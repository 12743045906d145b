package idlewatch

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/proxy/http1"
)

// dial connects to ln as the pool does: a wrapped TCP socket.
func dial(t *testing.T, ln net.Listener) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return http1.WrapConn(nc)
}

// serve accepts on ln and hands each accepted connection to the test.
func serve(t *testing.T) (net.Listener, <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 512)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			accepted <- c
		}
	}()
	return ln, accepted
}

// running reports whether w's epoll set and goroutine exist.
func running(w *Watch) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.run != nil
}

// TestLife: the watch's epoll set and goroutine exist while it watches a
// connection: the first starts them, the last one's Forget stops them,
// and the next connection starts them again.
func TestLife(t *testing.T) {
	ln, _ := serve(t)
	w := New(slog.New(slog.DiscardHandler))
	defer w.Close()
	if running(w) {
		t.Fatal("the watch runs before any connection")
	}
	for range 2 {
		a, b := w.Add(dial(t, ln)), w.Add(dial(t, ln))
		if a == nil || b == nil || !running(w) {
			t.Fatal("connections added but not watched")
		}
		a.Forget()
		if !running(w) {
			t.Fatal("the watch stopped with a connection left")
		}
		b.Forget()
		if running(w) {
			t.Fatal("the watch runs with no connection")
		}
		// Its goroutine ends as a stop, not as a failure: the next
		// connection is watched again.
		w.runs.Wait()
		if w.stopped.Load() {
			t.Fatal("stopping the idle set stopped the watch for good")
		}
	}
}

// TestAddTwice: a socket already in the set is not watched twice (the
// kernel refuses to add it again); the first watch of it goes on.
func TestAddTwice(t *testing.T) {
	ln, accepted := serve(t)
	w := New(slog.New(slog.DiscardHandler))
	defer w.Close()
	nc := dial(t, ln)
	defer nc.Close()
	first := w.Add(nc)
	if first == nil {
		t.Fatal("not watched")
	}
	defer first.Forget()
	if again := w.Add(nc); again != nil {
		t.Fatal("one socket watched twice")
	}
	if !running(w) {
		t.Fatal("a refused second add stopped the set of the first")
	}
	peer := <-accepted
	settle(t, first, nc, peer)
	if _, err := peer.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	waitState(t, first, Dirty)
}

// TestManyAtOnce: more sockets become readable at once than one
// collection takes (128): every one is heard, none waits for a later
// event.
func TestManyAtOnce(t *testing.T) {
	ln, accepted := serve(t)
	w := New(slog.New(slog.DiscardHandler))
	defer w.Close()
	const n = 300
	conns := make([]*Conn, n)
	peers := make([]net.Conn, n)
	ncs := make([]net.Conn, n)
	for i := range conns {
		nc := dial(t, ln)
		defer nc.Close()
		if conns[i] = w.Add(nc); conns[i] == nil {
			t.Fatal("not watched")
		}
		defer conns[i].Forget()
		peers[i] = <-accepted
		ncs[i] = nc
	}
	for i, c := range conns {
		settle(t, c, ncs[i], peers[i])
	}
	for _, p := range peers {
		if _, err := p.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range conns {
		waitState(t, c, Dirty)
	}
}

// waitState waits for c to reach want.
func waitState(t *testing.T, c *Conn, want State) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.State() != want {
		if time.Now().After(deadline) {
			t.Fatalf("state %d, want %d", c.State(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// settle makes c's socket drained and known quiet: the peer sends a byte,
// nc reads it, and once the watch had time to collect that arrival the
// connection must be clean. A collection that ran late (after the read
// began) leaves it dirty or unsure, as it should: the round is repeated.
func settle(t *testing.T, c *Conn, nc, peer net.Conn) {
	t.Helper()
	buf := make([]byte, 16) // larger than what arrives: the read drains the socket
	for attempt := 1; attempt <= 20; attempt++ {
		if _, err := peer.Write([]byte("r")); err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Read(buf); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(attempt) * 10 * time.Millisecond)
		if c.State() == Clean {
			return
		}
	}
	t.Fatalf("state %d after 20 quiet rounds, want clean", c.State())
}

// TestHears: a connection whose last read emptied the socket is clean
// while its peer is quiet, and dirty once the peer sends a byte or
// closes; a closed watch leaves its connections unsure (checked by Peek).
func TestHears(t *testing.T) {
	for _, tc := range []struct {
		name  string
		speak func(peer net.Conn)
	}{
		{"byte", func(peer net.Conn) { _, _ = peer.Write([]byte("x")) }},
		{"close", func(peer net.Conn) { peer.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, accepted := serve(t)
			w := New(slog.New(slog.DiscardHandler))
			defer w.Close()
			nc := dial(t, ln)
			defer nc.Close()
			c := w.Add(nc)
			if c == nil {
				t.Fatal("not watched")
			}
			defer c.Forget()
			peer := <-accepted
			settle(t, c, nc, peer)
			time.Sleep(20 * time.Millisecond)
			if got := c.State(); got != Clean {
				t.Fatalf("quiet peer: state %d, want clean", got)
			}
			tc.speak(peer)
			waitState(t, c, Dirty)
			w.Close()
			if got := c.State(); got != Unsure {
				t.Fatalf("after Close: state %d, want unsure", got)
			}
			// The connection stays usable after the watch closed.
			buf := make([]byte, 16)
			if tc.name == "byte" {
				if n, err := nc.Read(buf); err != nil || n != 1 {
					t.Fatalf("read after Close %d, %v", n, err)
				}
			} else if _, err := nc.Read(buf); !errors.Is(err, io.EOF) {
				t.Fatalf("read after peer close: %v, want EOF", err)
			}
		})
	}
}
