package wbatch

import (
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
)

// pair returns a batched client connection and the server's plain end.
func pair(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	b := New(c)
	t.Cleanup(func() { b.Close(); s.Close() })
	return b, s
}

// countingConn counts the writes that reach it.
type countingConn struct {
	net.Conn
	mu     sync.Mutex
	writes int
	gate   chan struct{} // when set, each write waits for it
}

func (c *countingConn) Write(p []byte) (int, error) {
	if c.gate != nil {
		<-c.gate
	}
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func TestBytesArriveInOrder(t *testing.T) {
	b, s := pair(t)
	var want bytes.Buffer
	for i := range 2000 {
		p := bytes.Repeat([]byte{byte(i)}, i%300+1)
		want.Write(p)
		if n, err := b.Write(p); n != len(p) || err != nil {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
	}
	b.Close()
	got, err := io.ReadAll(s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("read %d bytes, want %d, in order", len(got), want.Len())
	}
}

// TestBytesArriveInOrderInterleaved: writes that race the writer goroutine
// (each followed by a yield, so that the writer often finds nothing new and
// the buffers swap under load) still arrive whole and in order.
func TestBytesArriveInOrderInterleaved(t *testing.T) {
	c, s := net.Pipe() // a write lasts until the slow reader took it all
	b := New(c)
	defer s.Close()
	var want bytes.Buffer
	got := make(chan []byte)
	go func() {
		var d []byte
		buf := make([]byte, 100)
		for i := 0; ; i++ {
			n, err := s.Read(buf)
			d = append(d, buf[:n]...)
			if err != nil {
				got <- d
				return
			}
			if i%50 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	for i := range 20000 {
		p := bytes.Repeat([]byte{byte(i), byte(i >> 8)}, i%50+1)
		want.Write(p)
		if _, err := b.Write(p); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if i%3 == 0 {
			runtime.Gosched()
		}
	}
	b.Close()
	if d := <-got; !bytes.Equal(d, want.Bytes()) {
		t.Fatalf("read %d bytes, want %d, whole and in order", len(d), want.Len())
	}
}

// TestWritesCoalesce: writes made while the writer goroutine is busy go
// out in one system call.
func TestWritesCoalesce(t *testing.T) {
	c, s := net.Pipe()
	defer s.Close()
	cc := &countingConn{Conn: c, gate: make(chan struct{})}
	b := New(cc)
	defer func() {
		close(cc.gate)
		go func() { _, _ = io.Copy(io.Discard, s) }()
		b.Close()
	}()
	go func() { _, _ = io.Copy(io.Discard, s) }()
	_, _ = b.Write([]byte("first")) // the writer takes it and waits at the gate
	for !waitingAtGate(b) {
		runtime.Gosched()
	}
	for range 10 {
		_, _ = b.Write([]byte("frame"))
	}
	cc.gate <- struct{}{} // first write
	cc.gate <- struct{}{} // the ten queued meanwhile, together
	b.mu.Lock()
	for b.writing || len(b.buf) > 0 {
		b.mu.Unlock()
		runtime.Gosched()
		b.mu.Lock()
	}
	b.mu.Unlock()
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.writes != 2 {
		t.Fatalf("%d writes reached the connection, want 2 (one, then the ten queued behind it)", cc.writes)
	}
}

func waitingAtGate(b *Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.writing
}

// TestBackPressure: behind a write that does not complete, Write queues up
// to maxBuffered bytes and then blocks; a write larger than maxBuffered
// into an empty queue is taken whole.
func TestBackPressure(t *testing.T) {
	c, s := net.Pipe() // unbuffered: a write completes only when read
	defer s.Close()
	b := New(c)
	_, _ = b.Write(make([]byte, 10)) // taken by the writer, stuck in the pipe
	for !waitingAtGate(b) {
		runtime.Gosched()
	}
	writes := func(sizes ...int) chan struct{} {
		done := make(chan struct{})
		go func() {
			for _, n := range sizes {
				_, _ = b.Write(make([]byte, n))
			}
			close(done)
		}()
		return done
	}
	// Writes that must not block get a generous deadline: a goroutine of a
	// -race run on a loaded machine may not run for hundreds of ms, which
	// a 200 ms wait took for blocking. Blocking can only be seen as absence
	// over an interval; a slow machine makes that check pass, never fail.
	select {
	case <-writes(maxBuffered-1, 1):
	case <-time.After(10 * time.Second):
		t.Fatal("Write blocked with exactly maxBuffered bytes queued")
	}
	last := writes(1)
	select {
	case <-last:
		t.Fatal("Write did not block past maxBuffered bytes queued")
	case <-time.After(200 * time.Millisecond):
	}
	go func() { _, _ = io.Copy(io.Discard, s) }()
	select {
	case <-last:
	case <-time.After(5 * time.Second):
		t.Fatal("Write stayed blocked after the peer read")
	}
	b.Close()
}

// TestLargeWriteIntoEmptyQueue: a write larger than maxBuffered is not held
// back when nothing is queued.
func TestLargeWriteIntoEmptyQueue(t *testing.T) {
	c, s := net.Pipe()
	defer s.Close()
	b := New(c)
	defer func() { go func() { _, _ = io.Copy(io.Discard, s) }(); b.Close() }()
	_, _ = b.Write(make([]byte, 10)) // the writer is stuck with it; the queue is empty
	for !waitingAtGate(b) {
		runtime.Gosched()
	}
	done := make(chan struct{})
	go func() { _, _ = b.Write(make([]byte, 2*maxBuffered)); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a large write into an empty queue blocked")
	}
}

// TestWriteErrorIsSticky: a failed write fails the writes after it.
func TestWriteErrorIsSticky(t *testing.T) {
	b, s := pair(t)
	s.Close()
	var err error
	for range 1000 {
		if _, err = b.Write(make([]byte, 64<<10)); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err == nil {
		t.Fatal("writes to a closed peer never failed")
	}
	if _, err2 := b.Write([]byte("x")); err2 == nil {
		t.Fatal("a write after a failed one succeeded")
	}
}

func TestCloseAndCloseWrite(t *testing.T) {
	b, s := pair(t)
	_, _ = b.Write([]byte("half"))
	if err := b.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(s) // EOF after the queued bytes
	if err != nil || string(got) != "half" {
		t.Fatalf("read %q, %v; want the queued bytes, then EOF", got, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write([]byte("x")); !errors.Is(err, errClosed) {
		t.Fatalf("write after Close: %v, want errClosed", err)
	}
	b.Close() // a second Close must not hang or panic
}

// TestCloseDoesNotHangOnAStuckPeer: a peer that reads nothing delays Close
// by closeWait at most.
func TestCloseDoesNotHangOnAStuckPeer(t *testing.T) {
	c, s := net.Pipe()
	defer s.Close()
	b := New(c)
	_, _ = b.Write([]byte("never read"))
	done := make(chan struct{})
	go func() { b.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeWait + 5*time.Second):
		t.Fatal("Close hung on a peer that reads nothing")
	}
}

// NetConn is the wrapped connection: what looks through wrappers (the
// upstream's TLS identities) finds it under a batched connection.
func TestNetConn(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	c := New(a)
	defer c.Close()
	if c.NetConn() != a {
		t.Errorf("NetConn() = %v, want the wrapped connection", c.NetConn())
	}
}

// TestAppendAndWaitRoom: behind a write that does not complete, Append
// queues without blocking up to maxBacklog and then fails with
// ErrBacklog; WaitRoom blocks while maxBuffered bytes wait, returns false
// once its stop says so (at a Wake), and true once the peer read.
func TestAppendAndWaitRoom(t *testing.T) {
	c, s := net.Pipe()
	defer s.Close()
	b := New(c)
	defer func() { go func() { _, _ = io.Copy(io.Discard, s) }(); b.Close() }()
	_, _ = b.Write(make([]byte, 10))
	for !waitingAtGate(b) {
		runtime.Gosched()
	}
	if !b.HasRoom() {
		t.Fatal("no room with nothing queued")
	}
	for range maxBacklog / 1024 {
		if err := b.Append(make([]byte, 1024)); err != nil {
			t.Fatalf("Append failed within maxBacklog: %v", err)
		}
	}
	if err := b.Append(make([]byte, 1)); !errors.Is(err, ErrBacklog) {
		t.Fatalf("Append past maxBacklog: %v, want ErrBacklog", err)
	}
	if b.HasRoom() {
		t.Fatal("room reported with maxBacklog queued")
	}
	var stop sync.Mutex
	stopped := false
	res := make(chan bool, 1)
	go func() {
		res <- b.WaitRoom(func() bool { stop.Lock(); defer stop.Unlock(); return stopped })
	}()
	select {
	case <-res:
		t.Fatal("WaitRoom returned with maxBacklog queued")
	case <-time.After(100 * time.Millisecond):
	}
	stop.Lock()
	stopped = true
	stop.Unlock()
	b.Wake()
	select {
	case ok := <-res:
		if ok {
			t.Fatal("WaitRoom reported room after its stop")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitRoom did not return at Wake with its stop set")
	}
	go func() { res <- b.WaitRoom(nil) }()
	go func() { _, _ = io.Copy(io.Discard, s) }()
	select {
	case ok := <-res:
		if !ok {
			t.Fatal("WaitRoom reported no room after the peer read")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitRoom stayed blocked after the peer read")
	}
}

// TestQueueGrowsThroughBufferSizes: a queue that the writer does not take
// grows from one pooled buffer size to the next and past the largest
// (Append allows maxBacklog), and every byte arrives in order, also
// after the buffers went back to their pools and came out again.
func TestQueueGrowsThroughBufferSizes(t *testing.T) {
	c, s := net.Pipe() // unbuffered: a write completes only when read
	defer s.Close()
	b := New(c)
	defer b.Close()
	for round := range 3 {
		var want bytes.Buffer
		_, _ = b.Write([]byte{byte(round)}) // the writer is stuck with it until s reads
		want.WriteByte(byte(round))
		for !waitingAtGate(b) {
			runtime.Gosched()
		}
		for i, n := 0, 0; n < maxBacklog-2000; i++ {
			p := bytes.Repeat([]byte{byte(i + round)}, 1000+i%700)
			if err := b.Append(p); err != nil {
				t.Fatalf("round %d, append of %d bytes after %d: %v", round, len(p), n, err)
			}
			want.Write(p)
			n += len(p)
		}
		got := make([]byte, want.Len())
		if _, err := io.ReadFull(s, got); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("round %d: the %d bytes read are not the ones written, in order", round, len(got))
		}
		for !b.Idle() {
			runtime.Gosched()
		}
	}
}
