package listener

import (
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// failingListener fails its first failures Accepts with EMFILE, then
// blocks until closed.
type failingListener struct {
	failures int64
	calls    atomic.Int64
	closed   chan struct{}
	once     sync.Once
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.calls.Add(1) <= l.failures {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *failingListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *failingListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// After a failed Accept the loop waits and accepts again (it does not give
// the socket up): here two EMFILEs, then an Accept that waits for a client,
// in one back-off episode with one warning.
func TestAcceptGoesOnAfterErrors(t *testing.T) {
	h := &countingHandler{}
	m := NewManager(Options{Logger: slog.New(h)})
	defer m.Close()
	ln := &failingListener{failures: 2, closed: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.acceptLoop(&socket{ln: ln})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for ln.calls.Load() < 3 {
		select {
		case <-done:
			t.Fatalf("accept loop ended after %d Accept calls, with its socket open", ln.calls.Load())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("accept loop stuck after %d Accept calls", ln.calls.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := h.warns.Load(); n != 1 {
		t.Errorf("%d warnings, want 1 for the back-off episode", n)
	}
	ln.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("accept loop did not end when its socket closed")
	}
}
