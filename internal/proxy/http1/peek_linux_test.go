package http1

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// replayConn is a BufferedConn: it holds n bytes already read from the
// connection it wraps (the HCM's protocol sniffer keeps what it looked at).
type replayConn struct {
	net.Conn // the wrapped connection, as NetConn returns it
	n        int
}

func (r *replayConn) Buffered() int     { return r.n }
func (r *replayConn) NetConn() net.Conn { return r.Conn }

var _ BufferedConn = (*replayConn)(nil)

// rawConner is a RawConner whose wrapped connection is handed out only
// while it buffers nothing.
type rawConner struct {
	net.Conn
	buffering bool
}

func (r *rawConner) RawConn() net.Conn {
	if r.buffering {
		return nil
	}
	return r.Conn
}

// waitPeek polls Peek until it reports something other than PeekQuiet
// (bytes or an EOF on their way over loopback) or the bound passes.
func waitPeek(t *testing.T, c net.Conn) PeekState {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if s := Peek(c); s != PeekQuiet || time.Now().After(deadline) {
			return s
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPeek: Peek tells a quiet connection from one with bytes waiting and
// from one the peer closed or reset, without consuming anything, and looks
// through the wrappers the HCM puts around a connection.
func TestPeek(t *testing.T) {
	t.Run("quiet, then data, not consumed", func(t *testing.T) {
		c, s := tcpPair(t)
		w := WrapConn(c)
		if got := Peek(w); got != PeekQuiet {
			t.Fatalf("idle connection: Peek = %d, want PeekQuiet", got)
		}
		if _, err := s.Write([]byte("xy")); err != nil {
			t.Fatal(err)
		}
		if got := waitPeek(t, w); got != PeekData {
			t.Fatalf("after the peer wrote: Peek = %d, want PeekData", got)
		}
		// Peeking again still sees the bytes: nothing was consumed.
		if got := Peek(w); got != PeekData {
			t.Fatalf("second Peek = %d, want PeekData", got)
		}
		buf := make([]byte, 2)
		if _, err := io.ReadFull(w, buf); err != nil || string(buf) != "xy" {
			t.Fatalf("Read after Peek = %q, %v; want \"xy\"", buf, err)
		}
		if got := Peek(w); got != PeekQuiet {
			t.Fatalf("after reading everything: Peek = %d, want PeekQuiet", got)
		}
	})
	t.Run("peer closed", func(t *testing.T) {
		c, s := tcpPair(t)
		w := WrapConn(c)
		s.Close()
		if got := waitPeek(t, w); got != PeekClosed {
			t.Fatalf("after the peer closed: Peek = %d, want PeekClosed", got)
		}
	})
	t.Run("peer reset", func(t *testing.T) {
		c, s := tcpPair(t)
		w := WrapConn(c)
		if err := s.SetLinger(0); err != nil {
			t.Fatal(err)
		}
		s.Close() // RST: the peek fails with ECONNRESET
		if got := waitPeek(t, w); got != PeekClosed {
			t.Fatalf("after the peer reset: Peek = %d, want PeekClosed", got)
		}
	})
	t.Run("own side closed", func(t *testing.T) {
		c, _ := tcpPair(t)
		w := WrapConn(c)
		w.Close()
		if got := Peek(w); got != PeekClosed {
			t.Fatalf("closed connection: Peek = %d, want PeekClosed", got)
		}
	})
	t.Run("not a wrapped connection", func(t *testing.T) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		go b.Write([]byte("x")) //nolint:errcheck // blocks until the test ends; Peek must not read it
		if got := Peek(a); got != PeekQuiet {
			t.Fatalf("pipe: Peek = %d, want PeekQuiet", got)
		}
		c, s := tcpPair(t)
		if _, err := s.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		// A plain TCP connection (not from WrapConn) is not peeked.
		if got := Peek(c); got != PeekQuiet {
			t.Fatalf("unwrapped TCP connection: Peek = %d, want PeekQuiet", got)
		}
	})
	t.Run("wrappers", func(t *testing.T) {
		c, s := tcpPair(t)
		w := WrapConn(c)
		cases := []struct {
			name string
			conn net.Conn
			want PeekState
		}{
			{"DeadlineConn", NewDeadlineConn(w), PeekQuiet},
			{"BufferedConn holding nothing", &replayConn{Conn: w}, PeekQuiet},
			{"BufferedConn holding bytes", &replayConn{Conn: w, n: 3}, PeekData},
			{"BufferedConn holding one byte", &replayConn{Conn: w, n: 1}, PeekData},
			{"DeadlineConn over a BufferedConn holding bytes", NewDeadlineConn(&replayConn{Conn: w, n: 1}), PeekData},
			{"BufferedConn over a DeadlineConn", &replayConn{Conn: NewDeadlineConn(w)}, PeekQuiet},
			{"DeadlineConn over DeadlineConn", NewDeadlineConn(NewDeadlineConn(w)), PeekQuiet},
		}
		for _, tc := range cases {
			if got := Peek(tc.conn); got != tc.want {
				t.Errorf("quiet connection in a %s: Peek = %d, want %d", tc.name, got, tc.want)
			}
		}
		// Now with bytes waiting on the socket, every wrapper shows them:
		// a PeekQuiet here means Peek stopped at the wrapper.
		if _, err := s.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if got := waitPeek(t, w); got != PeekData {
			t.Fatalf("Peek = %d, want PeekData", got)
		}
		for _, conn := range []struct {
			name string
			conn net.Conn
		}{
			{"DeadlineConn", NewDeadlineConn(w)},
			{"BufferedConn holding nothing", &replayConn{Conn: w}},
			{"BufferedConn over a DeadlineConn", &replayConn{Conn: NewDeadlineConn(w)}},
			{"DeadlineConn over a BufferedConn", NewDeadlineConn(&replayConn{Conn: w})},
			{"DeadlineConn over DeadlineConn", NewDeadlineConn(NewDeadlineConn(w))},
		} {
			if got := Peek(conn.conn); got != PeekData {
				t.Errorf("bytes waiting under a %s: Peek = %d, want PeekData", conn.name, got)
			}
		}
	})
}

// TestRawSyscallConn: the socket under WrapConn's connection is found
// through DeadlineConns and RawConners, and not while a wrapper buffers
// bytes or when there is no WrapConn connection at all.
func TestRawSyscallConn(t *testing.T) {
	c, _ := tcpPair(t)
	w := WrapConn(c)
	found := []struct {
		name string
		conn net.Conn
	}{
		{"WrapConn's connection", w},
		{"DeadlineConn", NewDeadlineConn(w)},
		{"RawConner", &rawConner{Conn: w}},
		{"DeadlineConn over a RawConner", NewDeadlineConn(&rawConner{Conn: NewDeadlineConn(w)})},
	}
	for _, tc := range found {
		if RawSyscallConn(tc.conn) != w.(*rawConn).rc {
			t.Errorf("%s: RawSyscallConn did not find the socket", tc.name)
		}
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	none := []struct {
		name string
		conn net.Conn
	}{
		{"nil", nil},
		{"pipe", a},
		{"unwrapped TCP connection", c},
		{"RawConner buffering bytes", &rawConner{Conn: w, buffering: true}},
		{"DeadlineConn over a pipe", NewDeadlineConn(a)},
		{"BufferedConn (not a RawConner)", &replayConn{Conn: w}},
	}
	for _, tc := range none {
		if rc := RawSyscallConn(tc.conn); rc != nil {
			t.Errorf("%s: RawSyscallConn = %v, want nil", tc.name, rc)
		}
	}
}

// TestParkBuffer: an idle Reader gives its buffer back and takes one again
// before reading; one with unread bytes keeps its buffer and the bytes.
func TestParkBuffer(t *testing.T) {
	const head = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"

	t.Run("idle reader parks and reads again", func(t *testing.T) {
		r := NewReader(strings.NewReader(head + head))
		defer r.Release()
		if !r.ParkBuffer() {
			t.Fatal("ParkBuffer on a new Reader = false, want true")
		}
		if r.buf != nil {
			t.Fatal("the parked Reader still holds a buffer")
		}
		if !r.ParkBuffer() {
			t.Fatal("ParkBuffer on a parked Reader = false, want true")
		}
		r.UnparkBuffer()
		if len(r.buf) != DefaultBufferSize {
			t.Fatalf("UnparkBuffer: buffer of %d bytes, want %d", len(r.buf), DefaultBufferSize)
		}
		got, err := r.ReadHead(DefaultMaxHeadBytes)
		if err != nil || string(got) != head {
			t.Fatalf("ReadHead after UnparkBuffer = %q, %v", got, err)
		}
	})
	t.Run("unread bytes keep the buffer", func(t *testing.T) {
		r := NewReader(strings.NewReader(head + head))
		defer r.Release()
		if _, err := r.ReadHead(DefaultMaxHeadBytes); err != nil {
			t.Fatal(err)
		}
		if r.ParkBuffer() {
			t.Fatal("ParkBuffer with the next head buffered = true, want false")
		}
		if string(r.Buffered()) != head {
			t.Fatalf("after a refused ParkBuffer, Buffered = %q, want the next head", r.Buffered())
		}
		// UnparkBuffer on a Reader that has its buffer changes nothing.
		r.UnparkBuffer()
		if string(r.Buffered()) != head {
			t.Fatalf("after UnparkBuffer, Buffered = %q, want the next head", r.Buffered())
		}
		got, err := r.ReadHead(DefaultMaxHeadBytes)
		if err != nil || string(got) != head {
			t.Fatalf("second ReadHead = %q, %v", got, err)
		}
		// Everything read: now it parks, and its state starts afresh.
		if !r.ParkBuffer() {
			t.Fatal("ParkBuffer with nothing unread = false, want true")
		}
		if r.r != 0 || r.w != 0 || r.scan != 0 || r.big {
			t.Fatalf("parked Reader: r=%d w=%d scan=%d big=%v, want all zero", r.r, r.w, r.scan, r.big)
		}
		r.UnparkBuffer()
		if _, err := r.ReadHead(DefaultMaxHeadBytes); !errors.Is(err, io.EOF) {
			t.Fatalf("ReadHead at the end = %v, want io.EOF", err)
		}
	})
	t.Run("a grown buffer is not pooled", func(t *testing.T) {
		big := "GET / HTTP/1.1\r\nHost: a\r\nX: " + strings.Repeat("v", 2*DefaultBufferSize) + "\r\n\r\n"
		r := NewReader(strings.NewReader(big))
		if _, err := r.ReadHead(DefaultMaxHeadBytes); err != nil {
			t.Fatal(err)
		}
		if !r.big {
			t.Fatal("the head did not grow the buffer")
		}
		if !r.ParkBuffer() {
			t.Fatal("ParkBuffer = false, want true")
		}
		if r.big || r.buf != nil {
			t.Fatalf("parked Reader: big=%v, buffer of %d bytes; want neither", r.big, len(r.buf))
		}
		// Only DefaultBufferSize buffers go to the pool: a grown one
		// handed out again would keep its memory on an idle connection.
		for range 4 {
			p := bufPool.Get().(*[]byte)
			if cap(*p) != DefaultBufferSize {
				t.Fatalf("the pool handed out a buffer of capacity %d, want %d", cap(*p), DefaultBufferSize)
			}
			defer bufPool.Put(p)
		}
		r.UnparkBuffer()
		r.Release()
	})
}
