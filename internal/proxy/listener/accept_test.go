package listener

import (
	"context"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// emfileListener fails every Accept with EMFILE until closed.
type emfileListener struct {
	calls  atomic.Int64
	closed chan struct{}
	once   sync.Once
}

func (l *emfileListener) Accept() (net.Conn, error) {
	l.calls.Add(1)
	select {
	case <-l.closed:
		return nil, net.ErrClosed
	default:
	}
	return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
}

func (l *emfileListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *emfileListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// countingHandler counts warnings.
type countingHandler struct{ warns atomic.Int64 }

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		h.warns.Add(1)
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// TestAcceptBacksOffOnEMFILE: running out of descriptors must not spin the
// accept loop nor flood the log (net/http.Server.Serve's back-off: 5 ms
// doubling to 1 s), and the loop ends when its socket closes.
func TestAcceptBacksOffOnEMFILE(t *testing.T) {
	h := &countingHandler{}
	m := NewManager(Options{Logger: slog.New(h)})
	ln := &emfileListener{closed: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.acceptLoop(&socket{ln: ln})
	}()
	time.Sleep(300 * time.Millisecond)
	// Without back-off this is hundreds of thousands of calls; with it
	// 5+10+20+40+80+160 ms: about 7.
	if n := ln.calls.Load(); n > 30 {
		t.Errorf("%d accept calls in 300 ms: no back-off", n)
	}
	if n := h.warns.Load(); n != 1 {
		t.Errorf("%d warnings, want 1 per back-off episode", n)
	}
	ln.Close()
	m.Close() // cancels the back-off wait
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("accept loop did not end")
	}
}
