package http1

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection, closed at the
// end of the test.
func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, ok := <-accepted
	if !ok {
		c.Close()
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

func TestWrapConnOnlyTCP(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if WrapConn(a) != a {
		t.Fatal("a pipe was wrapped")
	}
	c, _ := tcpPair(t)
	w := WrapConn(c)
	if _, ok := w.(*rawConn); !ok {
		t.Fatalf("TCP conn wrapped as %T", w)
	}
	if w.LocalAddr().String() != c.LocalAddr().String() {
		t.Fatalf("local address %v, want %v", w.LocalAddr(), c.LocalAddr())
	}
}

// TestRawConnTransfer sends more than the socket buffers hold in both
// directions, so that writes wait for room and reads wait for data, and
// checks every byte arrives in order.
func TestRawConnTransfer(t *testing.T) {
	c, s := tcpPair(t)
	wc, ws := WrapConn(c), WrapConn(s)
	if n, err := wc.Write(nil); n != 0 || err != nil {
		t.Fatalf("Write(nil) = %d %v", n, err)
	}
	if n, err := ws.Read(nil); n != 0 || err != nil {
		t.Fatalf("Read(nil) = %d %v", n, err)
	}
	payload := make([]byte, 8<<20)
	for i := range payload {
		payload[i] = byte(i * 7 / 3)
	}
	deadline := time.Now().Add(30 * time.Second)
	_ = wc.SetDeadline(deadline)
	_ = ws.SetDeadline(deadline)
	done := make(chan error, 1)
	go func() {
		n, err := wc.Write(payload)
		if err == nil && n != len(payload) {
			err = io.ErrShortWrite
		}
		if err == nil {
			err = c.CloseWrite()
		}
		done <- err
	}()
	got, err := io.ReadAll(ws)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("received %d bytes, want %d equal to those sent", len(got), len(payload))
	}
	// After the peer's FIN, Read reports io.EOF again.
	if n, err := ws.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("read after EOF = %d %v", n, err)
	}
}

// TestRawConnErrors checks the errors: a deadline, a reset from the peer,
// a write to a reset connection and a read from a closed one are
// *net.OpError values that keep the cause.
func TestRawConnErrors(t *testing.T) {
	c, s := tcpPair(t)
	wc := WrapConn(c)
	buf := make([]byte, 16)

	_ = wc.SetReadDeadline(time.Now().Add(-time.Second))
	_, err := wc.Read(buf)
	var op *net.OpError
	// The runtime's own *net.OpError ("raw-read") is passed on as it is.
	var ne net.Error
	if !errors.As(err, &op) || !strings.HasSuffix(op.Op, "read") || !errors.Is(err, os.ErrDeadlineExceeded) ||
		!errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past deadline: %v", err)
	}
	_ = wc.SetReadDeadline(time.Time{})

	// The peer resets the connection.
	if err := s.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_ = wc.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = wc.Read(buf)
	if !errors.As(err, &op) || op.Op != "read" || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after reset: %v", err)
	}
	var werr error
	for i := 0; i < 100 && werr == nil; i++ {
		_, werr = wc.Write([]byte("x"))
	}
	if !errors.As(werr, &op) || op.Op != "write" || !(errors.Is(werr, syscall.EPIPE) || errors.Is(werr, syscall.ECONNRESET)) {
		t.Fatalf("write after reset: %v", werr)
	}
	if op.Source == nil || op.Addr == nil {
		t.Fatalf("error %v does not name the addresses", werr)
	}

	wc.Close()
	if _, err := wc.Read(buf); !errors.As(err, &op) || !strings.HasSuffix(op.Op, "read") || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if _, err := wc.Write(buf); !errors.As(err, &op) || !strings.HasSuffix(op.Op, "write") || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
}
