package cluster

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// TestDialForCancelledRequestNotPooled: a request cancelled while its
// connection is being dialed (an HTTP/2 stream its client reset) leaves
// no connection behind (net/http's Transport, which RoundTrip used
// before, would have pooled it).
func TestDialForCancelledRequestNotPooled(t *testing.T) {
	var open atomic.Int64
	srv := &http.Server{
		Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				open.Add(1)
			case http.StateClosed:
				open.Add(-1)
			}
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()

	c, err := build(eds("c", "c", time.Second), stats.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.h1.closeIdle(false)
	// The dial waits, before it connects, until the request is gone.
	dialing, release := make(chan struct{}), make(chan struct{})
	c.dialer.Control = func(string, string, syscall.RawConn) error {
		close(dialing)
		<-release
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://upstream/", nil)
	done := make(chan error, 1)
	go func() {
		_, err := c.RoundTrip(req, Endpoint{Network: "tcp", Address: ln.Addr().String()})
		done <- err
	}()
	select {
	case <-dialing:
	case <-time.After(5 * time.Second):
		t.Fatal("no dial")
	}
	// The request is cancelled while the dial is under way, and the dial
	// goes on to connect.
	cancel()
	close(release)
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the cancelled request succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled request did not return")
	}
	// The dial ends (its max_connections slot given back: destroyed) and
	// no connection stays open at the upstream.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && (c.breaker.st.cxClose.Load() == 0 || open.Load() != 0) {
		time.Sleep(10 * time.Millisecond)
	}
	if c.breaker.st.cxClose.Load() == 0 || open.Load() != 0 {
		t.Errorf("the dial for the cancelled request was kept: %d connections destroyed, %d open at the upstream", c.breaker.st.cxClose.Load(), open.Load())
	}
}
