package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/proxy/http1"
)

// awaitConn dials b through a cluster as the forwarding path does.
func awaitConn(t *testing.T, b *rawBackend) *UpstreamConn {
	t.Helper()
	c := rtCluster(t, nil)
	uc, err := c.GetConn(context.Background(), tcpEndpoint(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uc.Close() })
	if uc.await == nil {
		t.Fatal("a plain TCP upstream connection has no awaiter")
	}
	return uc
}

// TestWriteAwaitReadWaitsForTheAnswer: the request reaches the upstream
// whole, WriteAwaitRead returns only once the upstream answered, and the
// answer is then read as usual.
func TestWriteAwaitReadWaitsForTheAnswer(t *testing.T) {
	var answered atomic.Bool
	release := make(chan struct{})
	got := make(chan string, 1)
	b := newRawBackend(t, func(_ int, c net.Conn, br *bufio.Reader) {
		line, _ := br.ReadString('\n')
		got <- line
		<-release
		answered.Store(true)
		_, _ = io.WriteString(c, okResponse("hello"))
		_, _ = io.Copy(io.Discard, br)
	})
	uc := awaitConn(t, b)
	req := []byte("GET /x HTTP/1.1\r\nHost: svc\r\n\r\n")
	done := make(chan error, 1)
	go func() {
		n, err := uc.WriteAwaitRead(req)
		if err == nil && n != len(req) {
			err = errors.New("short write")
		}
		done <- err
	}()
	if line := recv(t, got); line != "GET /x HTTP/1.1\r\n" {
		t.Fatalf("upstream got %q", line)
	}
	select {
	case err := <-done:
		t.Fatalf("WriteAwaitRead returned before the answer (err %v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
	if !answered.Load() {
		t.Fatal("returned before the upstream answered")
	}
	head, err := uc.R.ReadHead(http1.DefaultMaxHeadBytes)
	if err != nil || !bytes.HasPrefix(head, []byte("HTTP/1.1 200 OK\r\n")) {
		t.Fatalf("read %q, %v", head, err)
	}
}

// TestWriteAwaitReadDeadline: an upstream that never answers holds the
// wait no longer than the read deadline set before it (recv fails after
// 10 s), and the Read after it times out.
func TestWriteAwaitReadDeadline(t *testing.T) {
	b := newRawBackend(t, func(_ int, _ net.Conn, br *bufio.Reader) { _, _ = io.Copy(io.Discard, br) })
	uc := awaitConn(t, b)
	uc.D.SetReadTimeouts(0, time.Now().Add(100*time.Millisecond))
	req := []byte("GET / HTTP/1.1\r\nHost: svc\r\n\r\n")
	done := make(chan error, 1)
	go func() {
		_, err := uc.WriteAwaitRead(req)
		done <- err
	}()
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
	if _, err := uc.R.ReadHead(http1.DefaultMaxHeadBytes); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after the wait: %v, want a timeout", err)
	}
}

// TestWriteAwaitReadClose: a close instead of an answer ends the wait,
// and the Read after it reports the end of the stream.
func TestWriteAwaitReadClose(t *testing.T) {
	b := newRawBackend(t, func(_ int, c net.Conn, br *bufio.Reader) {
		_, _ = br.ReadString('\n')
		c.Close()
	})
	uc := awaitConn(t, b)
	done := make(chan error, 1)
	go func() {
		_, err := uc.WriteAwaitRead([]byte("GET / HTTP/1.1\r\nHost: svc\r\n\r\n"))
		done <- err
	}()
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
	if _, err := uc.R.ReadHead(http1.DefaultMaxHeadBytes); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read after a close: %v, want EOF", err)
	}
}

// TestWriteAwaitReadLarge: a request larger than the socket's buffers,
// to an upstream that reads it only after a while, leaves whole (the
// rest through Write) and the answer is read.
func TestWriteAwaitReadLarge(t *testing.T) {
	const size = 16 << 20
	got := make(chan int, 1)
	b := newRawBackend(t, func(_ int, c net.Conn, br *bufio.Reader) {
		time.Sleep(20 * time.Millisecond) // let the client's send buffer fill
		n, _ := io.CopyN(io.Discard, br, size)
		got <- int(n)
		_, _ = io.WriteString(c, okResponse("ok"))
		_, _ = io.Copy(io.Discard, br)
	})
	uc := awaitConn(t, b)
	req := bytes.Repeat([]byte("x"), size)
	done := make(chan error, 1)
	go func() {
		n, err := uc.WriteAwaitRead(req)
		if err == nil && n != len(req) {
			err = errors.New("short write")
		}
		done <- err
	}()
	if n := recv(t, got); n != size {
		t.Fatalf("upstream got %d bytes, want %d", n, size)
	}
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
	head, err := uc.R.ReadHead(http1.DefaultMaxHeadBytes)
	if err != nil || !strings.HasPrefix(string(head), "HTTP/1.1 200") {
		t.Fatalf("read %q, %v", head, err)
	}
}

// TestWriteAwaitReadClosedConn: on a closed connection nothing is sent
// and the error is Write's.
func TestWriteAwaitReadClosedConn(t *testing.T) {
	b := newRawBackend(t, func(_ int, _ net.Conn, br *bufio.Reader) { _, _ = io.Copy(io.Discard, br) })
	uc := awaitConn(t, b)
	uc.Conn.Close()
	if n, err := uc.WriteAwaitRead([]byte("GET / HTTP/1.1\r\n\r\n")); n != 0 || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("got %d, %v; want 0 and a closed-connection error", n, err)
	}
}
