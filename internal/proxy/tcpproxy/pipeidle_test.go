package tcpproxy

import (
	"io"
	"net"
	"testing"
	"time"
)

// One direction quiet for longer than the idle timeout while the other
// moves bytes is not idle: the quiet direction still forwards what comes
// later.
func TestPipeIdleOneWayTrafficKeepsBothDirections(t *testing.T) {
	client, down := pair(t)
	up, backend := pair(t)
	done := make(chan struct{})
	go func() { defer close(done); PipeIdle(down, up, 200*time.Millisecond) }()

	// The backend streams to the client for three idle periods; the client
	// says nothing meanwhile.
	buf := make([]byte, 1)
	for i := range 12 {
		if _, err := io.WriteString(backend, "s"); err != nil {
			t.Fatalf("round %d: backend write: %v", i, err)
		}
		client.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(client, buf); err != nil {
			t.Fatalf("round %d: client read: %v", i, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := io.WriteString(client, "late"); err != nil {
		t.Fatalf("client write: %v", err)
	}
	got := make([]byte, 4)
	backend.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(backend, got); err != nil || string(got) != "late" {
		t.Fatalf("backend read %q, %v; want the client's bytes after its quiet spell", got, err)
	}
	client.Close()
	backend.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("pipe did not end after both peers closed")
	}
}

// An error in one direction (the upstream resets) ends both: the pipe
// returns without waiting for the client, whose connection is closed.
func TestPipeErrorEndsBothDirections(t *testing.T) {
	client, down := pair(t)
	up, backend := pair(t)
	done := make(chan struct{})
	go func() { defer close(done); PipeIdle(down, up, time.Minute) }()

	mustWrite(t, backend, "x")
	buf := make([]byte, 1)
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(client, buf); err != nil {
		t.Fatalf("client read: %v", err)
	}
	if err := backend.(*net.TCPConn).SetLinger(0); err != nil { // close with a reset
		t.Fatal(err)
	}
	backend.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("pipe still running after the upstream reset, with the client open")
	}
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := client.Read(buf); err == nil {
		t.Fatalf("client read %d bytes after the reset, want its connection closed", n)
	}
}
