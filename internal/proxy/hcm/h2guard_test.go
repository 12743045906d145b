package hcm

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	h2server "github.com/straitmesh/strait/internal/proxy/http2/server"
	"github.com/straitmesh/strait/internal/proxy/wbatch"
)

// TestGuardReplyWhileHandlerWritesHeader: on the HTTP/2 server the stream
// guard gives the handler the server's own header map; when the stream
// idle timeout passes while the handler is still writing into it, the
// guard's 408 goes out from a new map (nothing of the handler's in it, no
// race: run with -race), and the request's context, the server stream's
// own, ends, which ends the handler.
func TestGuardReplyWhileHandlerWritesHeader(t *testing.T) {
	ended := make(chan error, 1)
	h := guardStream(&Limits{StreamIdleTimeout: 100 * time.Millisecond}, func(w http.ResponseWriter, r *http.Request) {
		stop := time.Now().Add(10 * time.Second)
		for i := 0; r.Context().Err() == nil && time.Now().Before(stop); i++ {
			w.Header().Set("X-Busy", strconv.Itoa(i))
			time.Sleep(time.Millisecond)
		}
		ended <- r.Context().Err()
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			c := h2server.New(wbatch.New(nc), h2server.Config{Handler: h})
			go c.Serve(context.Background())
		}
	}()
	resp, err := h2cClient().Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || resp.Header.Get("X-Strait-Response-Flags") != "SI" || resp.Header.Get("X-Busy") != "" {
		t.Errorf("got %d, flags %q, X-Busy %q; want 408, SI, none of the handler's header", resp.StatusCode, resp.Header.Get("X-Strait-Response-Flags"), resp.Header.Get("X-Busy"))
	}
	select {
	case err := <-ended:
		if err == nil {
			t.Error("the handler's context did not end with the stream idle timeout")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the handler did not end")
	}
}

// TestTETrailers: a TE header asks for trailers in any element of any of
// its values, with parameters and spaces, case aside.
func TestTETrailers(t *testing.T) {
	for _, tc := range []struct {
		vv   []string
		want bool
	}{
		{nil, false},
		{[]string{""}, false},
		{[]string{"trailers"}, true},
		{[]string{"gzip, Trailers"}, true},
		{[]string{"gzip", " trailers ;q=0.5"}, true},
		{[]string{"gzip,deflate"}, false},
		{[]string{"trailersx", "x-trailers"}, false},
		{[]string{",,trailers,"}, true},
	} {
		if got := teTrailers(tc.vv); got != tc.want {
			t.Errorf("teTrailers(%q) = %v, want %v", tc.vv, got, tc.want)
		}
		// What goes upstream: one "trailers", or nothing.
		up := upstreamTE(tc.vv)
		if tc.want != (len(up) == 1 && up[0] == "trailers") || (!tc.want && up != nil) {
			t.Errorf("upstreamTE(%q) = %q", tc.vv, up)
		}
	}
	// gRPC's exact value goes up as it came; anything else as a new one.
	gRPC := []string{"trailers"}
	if up := upstreamTE(gRPC); &up[0] != &gRPC[0] {
		t.Error("upstreamTE of gRPC's TE made a copy")
	}
	twice := []string{"trailers", "trailers"}
	if up := upstreamTE(twice); len(up) != 1 || &up[0] == &twice[0] {
		t.Errorf("upstreamTE(%q) = %q, want a new single value", twice, up)
	}
}

// TestTrailerKey: gRPC's trailer names and any other get the prefix.
func TestTrailerKey(t *testing.T) {
	for _, k := range []string{"Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin", "X-Other"} {
		if got := trailerKey(k); got != http.TrailerPrefix+k {
			t.Errorf("trailerKey(%q) = %q", k, got)
		}
	}
}
