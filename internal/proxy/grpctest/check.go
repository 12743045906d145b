package grpctest

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Serve starts a gRPC server with the test service on a loopback port and
// returns it and its address; it stops when the test ends.
func Serve(t testing.TB) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	s := NewServer()
	Register(gs, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(ln)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-done
	})
	return s, ln.Addr().String()
}

// Dial returns a plaintext client of addr, closed when the test ends.
func Dial(t testing.TB, addr string) Client {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return Client{CC: cc}
}

// CheckAll runs every kind of call through c, which reaches s (through
// proxies or not), and checks the results: unary with header and trailer
// metadata, a non-OK status with an encoded message, server, client and
// bidirectional streaming, a deadline that expires (which s must see as
// its context ending) and a cancellation (which must reach s: without a
// deadline, only the reset stream tells s the call ended). s may be nil
// when the server runs in another process: then only the client's side of
// the last two is checked.
func CheckAll(t *testing.T, c Client, s *Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t.Run("unary", func(t *testing.T) {
		var h, tr metadata.MD
		got, err := c.Echo(ctx, "hello", &h, &tr)
		if err != nil || got != "hello" {
			t.Fatalf("Echo = %q, %v; want hello", got, err)
		}
		if v := h.Get("x-echo"); !slices.Equal(v, []string{"hello"}) {
			t.Errorf("header x-echo = %q", v)
		}
		if v := tr.Get("x-trailer"); !slices.Equal(v, []string{"hello"}) {
			t.Errorf("trailer x-trailer = %q", v)
		}
	})
	t.Run("status", func(t *testing.T) {
		var h, tr metadata.MD
		_, err := c.Echo(ctx, FailInput, &h, &tr)
		st, _ := status.FromError(err)
		if st.Code() != FailCode || st.Message() != FailMessage {
			t.Fatalf("Echo(fail) = %v; want %v %q", err, FailCode, FailMessage)
		}
		if v := tr.Get("x-trailer"); !slices.Equal(v, []string{FailInput}) {
			t.Errorf("trailer x-trailer = %q", v)
		}
	})
	t.Run("server-streaming", func(t *testing.T) {
		got, err := c.Count(ctx, 100)
		if err != nil || len(got) != 100 || got[0] != "0" || got[99] != "99" {
			t.Fatalf("Count(100) = %d messages, %v", len(got), err)
		}
	})
	t.Run("client-streaming", func(t *testing.T) {
		got, err := c.Join(ctx, "a", "b", "c")
		if err != nil || got != "a,b,c" {
			t.Fatalf("Join = %q, %v", got, err)
		}
	})
	t.Run("bidi", func(t *testing.T) {
		got, err := c.Chat(ctx, "x", "y", "z")
		if err != nil || !slices.Equal(got, []string{"X", "Y", "Z"}) {
			t.Fatalf("Chat = %q, %v", got, err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		dctx, dcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer dcancel()
		_, err := c.Echo(dctx, WaitInput, nil, nil)
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("Echo(wait) with a deadline = %v; want DeadlineExceeded", err)
		}
		if s == nil {
			return
		}
		select {
		case err := <-s.Canceled:
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				t.Errorf("server context ended with %v", err)
			}
		case <-ctx.Done():
			t.Fatal("the server never saw the call end")
		}
	})
	t.Run("cancel", func(t *testing.T) {
		cctx, ccancel := context.WithCancel(ctx)
		time.AfterFunc(200*time.Millisecond, ccancel)
		_, err := c.Echo(cctx, WaitInput, nil, nil)
		if status.Code(err) != codes.Canceled {
			t.Fatalf("Echo(wait) cancelled = %v; want Canceled", err)
		}
		if s == nil {
			return
		}
		select {
		case err := <-s.Canceled:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("server context ended with %v, want context.Canceled", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the cancellation never reached the server")
		}
	})
}
