package client

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/straitmesh/strait/internal/proxy/wbatch"
)

// xnetServer serves h with x/net/http2's server (h2c, prior knowledge)
// and returns its address.
func xnetServer(t testing.TB, h http.Handler, srv *http2.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if srv == nil {
		srv = &http2.Server{}
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				srv.ServeConn(c, &http2.ServeConnOpts{Handler: h})
			}()
		}
	}()
	return ln.Addr().String()
}

func dial(t *testing.T, addr string, cfg Config) *Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(wbatch.New(nc), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func request(t *testing.T, method, path string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, "http://backend"+path, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return string(b)
}

// TestAgainstXNetServer: requests of every shape through the client to
// x/net/http2's server: heads, bodies both ways past the initial windows
// (flow control), trailers both ways (gRPC), HEAD, and many concurrent
// streams each getting its own response.
func TestAgainstXNetServer(t *testing.T) {
	big := make([]byte, 3<<20)
	_, _ = rand.Read(big)
	addr := xnetServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			w.Header().Set("Trailer", "X-Sum")
			w.Header().Set("X-Method", r.Method)
			b, _ := io.ReadAll(r.Body)
			w.WriteHeader(201)
			_, _ = w.Write(b)
			w.Header().Set("X-Sum", fmt.Sprint(len(b), " ", r.Trailer.Get("X-Req-Trailer")))
		case "/big":
			w.Header().Set("Content-Length", fmt.Sprint(len(big)))
			_, _ = w.Write(big)
		case "/grpc":
			w.Header().Set("Content-Type", "application/grpc")
			_, _ = w.Write([]byte("msg"))
			w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
		default:
			w.Header().Set("X-Path", r.URL.Path)
			w.Header().Set("X-Authority", r.Host)
			w.Header().Set("X-Te", r.Header.Get("Te"))
			_, _ = io.WriteString(w, "path "+r.URL.RequestURI())
		}
	}), &http2.Server{MaxConcurrentStreams: 50})
	c := dial(t, addr, Config{StreamWindow: 65535, ConnWindow: 65535})

	t.Run("get", func(t *testing.T) {
		req := request(t, "GET", "/a?b=c", nil)
		req.Header.Set("Te", "trailers")
		req.Header.Set("Connection", "close")
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, resp); got != "path /a?b=c" || resp.StatusCode != 200 || resp.Header.Get("X-Authority") != "backend" || resp.Header.Get("X-Te") != "trailers" {
			t.Fatalf("got %d %q %v", resp.StatusCode, got, resp.Header)
		}
	})
	t.Run("head", func(t *testing.T) {
		resp, err := c.RoundTrip(request(t, "HEAD", "/big", nil))
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, resp); got != "" || resp.ContentLength != int64(len(big)) {
			t.Fatalf("HEAD: %q, content-length %d", got, resp.ContentLength)
		}
	})
	t.Run("big response past the windows", func(t *testing.T) {
		resp, err := c.RoundTrip(request(t, "GET", "/big", nil))
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, resp); got != string(big) {
			t.Fatalf("big body: %d bytes, want %d", len(got), len(big))
		}
	})
	t.Run("big request body and trailers both ways", func(t *testing.T) {
		pr, pw := io.Pipe()
		req := request(t, "POST", "/echo", pr)
		req.Trailer = http.Header{"X-Req-Trailer": nil}
		go func() {
			_, _ = pw.Write(big)
			req.Trailer.Set("X-Req-Trailer", "t1")
			pw.Close()
		}()
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, resp); got != string(big) {
			t.Fatalf("echo: %d bytes, want %d", len(got), len(big))
		}
		if resp.StatusCode != 201 || resp.Header.Get("X-Method") != "POST" {
			t.Fatalf("echo: %d %v", resp.StatusCode, resp.Header)
		}
		if got, want := resp.Trailer.Get("X-Sum"), fmt.Sprint(len(big), " t1"); got != want {
			t.Fatalf("trailer X-Sum %q, want %q", got, want)
		}
	})
	t.Run("grpc trailers", func(t *testing.T) {
		resp, err := c.RoundTrip(request(t, "POST", "/grpc", strings.NewReader("req")))
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, resp); got != "msg" || resp.Trailer.Get("Grpc-Status") != "0" {
			t.Fatalf("grpc: %q trailers %v", got, resp.Trailer)
		}
	})
	t.Run("concurrent streams", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for i := range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				path := fmt.Sprintf("/s%d", i)
				if !c.Reserve() {
					// At the server's 50 streams: wait for room.
					for !c.Reserve() {
						time.Sleep(time.Millisecond)
					}
				}
				resp, err := c.RoundTrip(request(t, "GET", path, nil))
				if err != nil {
					errs <- err
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil || string(b) != "path "+path || resp.Header.Get("X-Path") != path {
					errs <- fmt.Errorf("%s got %q %v: %w", path, b, resp.Header.Get("X-Path"), err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if n := c.Streams(); n != 0 {
			t.Errorf("%d streams left open", n)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		pr, pw := io.Pipe()
		defer pw.Close()
		req := request(t, "POST", "/echo", pr).WithContext(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := c.RoundTrip(req)
			done <- err
		}()
		time.Sleep(20 * time.Millisecond)
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("canceled request: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a canceled request did not return")
		}
	})
}
