package tcpproxy

import (
	"io"
	"net"
	"testing"
	"time"
)

// pair returns a connected loopback TCP pair.
func pair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestPipeHalfClose: the client sends a request and shuts down its write
// side; the upstream reads to EOF, then answers and closes. The answer
// must reach the client, and both pipes end.
func TestPipeHalfClose(t *testing.T) {
	client, down := pair(t)
	up, backend := pair(t)
	done := make(chan struct{})
	go func() { defer close(done); PipeIdle(down, up, time.Minute) }()
	client.SetDeadline(time.Now().Add(10 * time.Second))
	backend.SetDeadline(time.Now().Add(10 * time.Second))
	mustWrite(t, client, "ping")
	if err := client.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(backend)
	if err != nil || string(got) != "ping" {
		t.Fatalf("backend read %q %v", got, err)
	}
	time.Sleep(50 * time.Millisecond) // answer well after the half-close
	mustWrite(t, backend, "pong")
	backend.Close()
	got, err = io.ReadAll(client)
	if err != nil || string(got) != "pong" {
		t.Fatalf("client read %q %v, want the answer after its half-close", got, err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("pipe did not end")
	}
}

// TestPipeIdleTimeout: nothing moves either way; both connections close.
func TestPipeIdleTimeout(t *testing.T) {
	client, down := pair(t)
	up, backend := pair(t)
	done := make(chan struct{})
	// The idle timeout is long against the 50 ms between writes, so that a
	// loaded machine's scheduling stalls do not read as idleness; the
	// traffic lasts longer than the timeout, so it is what keeps the pipe
	// open.
	const idle = 1500 * time.Millisecond
	go func() { defer close(done); PipeIdle(down, up, idle) }()
	buf := make([]byte, 1)
	for start := time.Now(); time.Since(start) < 2*idle; {
		mustWrite(t, client, "x")
		backend.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(backend, buf); err != nil {
			t.Fatalf("after %v of traffic: %v", time.Since(start), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("idle pipe not closed")
	}
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := client.Read(buf); err == nil {
		t.Fatal("client connection still open")
	}
}

// mustWrite writes s to w or fails the test.
func mustWrite(t *testing.T, w io.Writer, s string) {
	t.Helper()
	if _, err := io.WriteString(w, s); err != nil {
		t.Fatalf("write %q: %v", s, err)
	}
}
