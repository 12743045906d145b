package http1

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestMarkReads: a marked connection records the epochs around the
// receive that returned data (not around a Read that waited for it), and
// whether that receive emptied the socket.
func TestMarkReads(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var epoch atomic.Uint64
	epoch.Store(2)
	c := NewDeadlineConn(WrapConn(cc))
	m := MarkReads(c, &epoch)
	if m == nil {
		t.Fatal("MarkReads found no raw socket under a DeadlineConn")
	}
	// A Read that waits: the epoch moves on while it does.
	go func() {
		time.Sleep(50 * time.Millisecond)
		epoch.Store(6)
		_, _ = s.Write([]byte("abc"))
	}()
	buf := make([]byte, 8)
	if n, err := c.Read(buf); err != nil || n != 3 {
		t.Fatalf("read %d, %v", n, err)
	}
	if !m.Drained || m.D0 != 6 || m.D1 != 6 {
		t.Errorf("after a short read: %+v, want drained between epochs 6 and 6", *m)
	}
	// A read that fills the buffer may leave bytes queued.
	if _, err := s.Write([]byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if n, err := c.Read(buf); err != nil || n != len(buf) {
		t.Fatalf("read %d, %v", n, err)
	}
	if m.Drained {
		t.Error("a read that filled the buffer was taken to have emptied the socket")
	}
	if MarkReads(&net.TCPConn{}, &epoch) != nil {
		t.Error("MarkReads marked a connection not made by WrapConn")
	}
}

// TestMarkReadsEOF: a receive that returns the end of the stream (or an
// error) returned no data: it is not taken to have emptied the socket of
// data.
func TestMarkReadsEOF(t *testing.T) {
	client, server := tcpPair(t)
	var epoch atomic.Uint64
	c := WrapConn(client)
	m := MarkReads(c, &epoch)
	if m == nil {
		t.Fatal("MarkReads found no raw socket")
	}
	if err := server.Close(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if n, err := c.Read(buf); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("read %d, %v; want EOF", n, err)
	}
	if m.Drained {
		t.Error("a receive that returned EOF was taken to have drained data")
	}
}
