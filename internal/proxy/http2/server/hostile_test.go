package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/straitmesh/strait/internal/proxy/http2/wire"
	"github.com/straitmesh/strait/internal/proxy/wbatch"
)

// oursConns is ours, handing each connection to conns.
func oursConns(t *testing.T, h http.Handler, cfg Config, conns chan<- *Conn) string {
	t.Helper()
	cfg.Handler = h
	return listen(t, func(nc net.Conn) {
		c := New(wbatch.New(nc), cfg)
		conns <- c
		c.Serve(context.Background())
	})
}

// TestMalformedRequests are requests that RFC 9113 calls malformed (x/net
// answers some of them 400): the stream gets PROTOCOL_ERROR and the
// handler never runs.
func TestMalformedRequests(t *testing.T) {
	var ran atomic.Int32
	addr := ours(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
	}), Config{})
	for _, tc := range []struct {
		name string
		send func(r *rawClient)
	}{
		{"connection", func(r *rawClient) { r.get(1, "/", "connection", "close") }},
		{"keep-alive", func(r *rawClient) { r.get(1, "/", "keep-alive", "5") }},
		{"proxy-connection", func(r *rawClient) { r.get(1, "/", "proxy-connection", "x") }},
		{"transfer-encoding", func(r *rawClient) { r.get(1, "/", "transfer-encoding", "chunked") }},
		{"upgrade", func(r *rawClient) { r.get(1, "/", "upgrade", "h2c") }},
		{"te other than trailers", func(r *rawClient) { r.get(1, "/", "te", "gzip") }},
		{"two content-lengths", func(r *rawClient) {
			r.headers(1, false, reqFields("POST", "/", "content-length", "1", "content-length", "2")...)
		}},
		{"content-length not a number", func(r *rawClient) {
			r.headers(1, false, reqFields("POST", "/", "content-length", "x")...)
		}},
		{"content-length with END_STREAM", func(r *rawClient) {
			r.headers(1, true, reqFields("POST", "/", "content-length", "3")...)
		}},
		{"two host fields", func(r *rawClient) {
			r.headers(1, true, ":method", "GET", ":scheme", "http", ":path", "/", "host", "a", "host", "b")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ran.Load()
			r := dialRaw(t, addr)
			tc.send(r)
			r.flush()
			r.waitFor("the reset", func() bool { return r.done(1) })
			r.mu.Lock()
			o := *r.stream(1)
			r.mu.Unlock()
			if o.Reset != http2.ErrCodeProtocol || o.Status != "" {
				t.Errorf("got %+v, want RST_STREAM PROTOCOL_ERROR and no response", o)
			}
			if ran.Load() != before {
				t.Error("the handler ran for a malformed request")
			}
		})
	}
	t.Run("body shorter than content-length", func(t *testing.T) {
		r := dialRaw(t, addr)
		r.headers(1, false, reqFields("POST", "/", "content-length", "5")...)
		_ = r.fr.WriteData(1, true, []byte("abc"))
		r.flush()
		r.waitFor("the reset", func() bool { return r.done(1) })
		r.mu.Lock()
		o := *r.stream(1)
		r.mu.Unlock()
		if o.Reset != http2.ErrCodeProtocol {
			t.Errorf("got %+v, want RST_STREAM PROTOCOL_ERROR", o)
		}
	})
}

// TestRefusedStream: a stream past MAX_CONCURRENT_STREAMS gets
// REFUSED_STREAM; the open one is served.
func TestRefusedStream(t *testing.T) {
	release := make(chan struct{})
	addr := ours(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	}), Config{MaxConcurrentStreams: 1})
	r := dialRaw(t, addr)
	r.get(1, "/hold")
	r.get(3, "/")
	r.flush()
	r.waitFor("stream 3's reset", func() bool { return r.done(3) })
	close(release)
	r.waitFor("stream 1's response", func() bool { return r.done(1) })
	r.get(5, "/")
	r.flush()
	r.waitFor("stream 5's response", func() bool { return r.done(5) })
	r.mu.Lock()
	defer r.mu.Unlock()
	if o := r.stream(3); o.Reset != http2.ErrCodeRefusedStream {
		t.Errorf("stream 3: %+v, want REFUSED_STREAM", *o)
	}
	for _, id := range []uint32{1, 5} {
		if o := r.stream(id); o.Status != "200" || o.Body != "ok" {
			t.Errorf("stream %d: %+v, want 200 ok", id, *o)
		}
	}
}

// TestStreamFreedAtEndStream: with SETTINGS_MAX_CONCURRENT_STREAMS 1, a
// client that opens its next stream the moment it reads the previous
// one's END_STREAM is never refused: the stream stops counting before its
// last frame is queued, not when the handler's goroutine gets to it.
func TestStreamFreedAtEndStream(t *testing.T) {
	addr := ours(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/body" {
			_, _ = io.WriteString(w, "ok")
		}
	}), Config{MaxConcurrentStreams: 1})
	r := dialRaw(t, addr)
	const n = 300
	for i := uint32(0); i < n; i++ {
		id := 2*i + 1
		path := "/"
		if i%2 == 1 {
			path = "/body" // END_STREAM on DATA instead of HEADERS
		}
		r.get(id, path)
		r.flush()
		if !r.waitFor(fmt.Sprintf("stream %d", id), func() bool { return r.done(id) }) {
			return
		}
		r.mu.Lock()
		o := *r.stream(id)
		r.mu.Unlock()
		if o.Reset != 0 || o.Status != "200" {
			t.Fatalf("stream %d (%d after the previous one ended): %+v, want 200", id, i, o)
		}
	}
}

// TestPeerThatDoesNotRead: a client that opens its windows wide and never
// reads must not make the server buffer its response: the handler's
// writes block, the heap stays flat, and once the client leaves the
// handler's write fails and the goroutines end.
func TestPeerThatDoesNotRead(t *testing.T) {
	var written atomic.Int64
	handlerDone := make(chan error, 1)
	addr := ours(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 32<<10)
		for {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err == nil {
				w.(http.Flusher).Flush()
			}
			if err != nil {
				handlerDone <- err
				return
			}
		}
	}), Config{})
	g0 := runtime.NumGoroutine()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fr := http2.NewFramer(c, nil)
	_, _ = io.WriteString(c, http2.ClientPreface)
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	_ = fr.WriteWindowUpdate(0, 1<<31-1-65535)
	hdr := dialFields(t, reqFields("GET", "/endless"))
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hdr, EndStream: true, EndHeaders: true})
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap0 := ms.HeapAlloc
	// The kernel's buffers fill, then wbatch's; then the writes stop.
	var stalled int64
	for range 50 {
		time.Sleep(100 * time.Millisecond)
		n := written.Load()
		if n == stalled && n > 0 {
			break
		}
		stalled = n
	}
	time.Sleep(300 * time.Millisecond)
	if n := written.Load(); n != stalled {
		t.Fatalf("the handler kept writing (%d then %d bytes) to a client that does not read", stalled, n)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	t.Logf("the handler wrote %d KiB before its writes blocked; heap %+d KiB", stalled>>10, (int64(ms.HeapAlloc)-int64(heap0))>>10)
	if grew := int64(ms.HeapAlloc) - int64(heap0); grew > 2<<20 {
		t.Errorf("heap grew by %d KiB for a client that does not read", grew>>10)
	}
	c.Close()
	select {
	case err := <-handlerDone:
		if err == nil {
			t.Error("the handler's write succeeded after the client left")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's write stayed blocked after the client left")
	}
	waitGoroutines(t, g0)
}

// dialFields encodes a header block.
func dialFields(t *testing.T, fields []string) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return b.Bytes()
}

// waitGoroutines waits (bounded) for the goroutine count to come back to
// at most n (plus the runtime's slack).
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	for range 100 {
		if runtime.NumGoroutine() <= n+1 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	buf := make([]byte, 1<<16)
	t.Errorf("goroutines %d, want at most %d:\n%s", runtime.NumGoroutine(), n+1, buf[:runtime.Stack(buf, true)])
}

// TestAnswersPiledUp: a client that never reads but keeps sending PINGs
// (each asks for an answer) gets its connection closed once the answers
// pile up past wbatch's backlog, instead of growing the server's memory.
func TestAnswersPiledUp(t *testing.T) {
	// Small socket buffers (the client's set before the handshake, so
	// its window is small too; the server's send buffer): the answers
	// pile up in the server after some tens of thousands of PINGs, not
	// after the megabytes loopback's autotuning would hold first (7 MB
	// of PINGs: 11 s under -race on an idle machine, past 20 s loaded).
	addr := listen(t, func(nc net.Conn) {
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetWriteBuffer(4096)
		}
		New(wbatch.New(nc), Config{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}).Serve(context.Background())
	})
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			if serr == nil {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4096)
			}
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fr := http2.NewFramer(c, nil)
	_, _ = io.WriteString(c, http2.ClientPreface)
	_ = fr.WriteSettings()
	var ping []byte
	for range 1000 {
		ping = append(ping, 0, 0, 8, 0x6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8)
	}
	// About 25,000 PINGs: 2 s on an idle machine, 7 s under -race; the
	// bound is for a loaded machine.
	deadline := time.Now().Add(60 * time.Second)
	_ = c.SetWriteDeadline(deadline)
	for time.Now().Before(deadline) {
		if _, err := c.Write(ping); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				break
			}
			return // closed by the server
		}
	}
	t.Fatal("the server kept reading PINGs it could not answer")
}

// TestControlFrameFloods: PRIORITY and WINDOW_UPDATE frames beyond what
// the streams opened and the DATA sent justify end the connection with
// ENHANCE_YOUR_CALM, as Envoy's codec does.
func TestControlFrameFloods(t *testing.T) {
	addr := ours(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), Config{})
	for _, tc := range []struct {
		name string
		send func(r *rawClient)
	}{
		{"priority", func(r *rawClient) {
			for i := range 1000 {
				_ = r.fr.WritePriority(uint32(2*i+1), http2.PriorityParam{StreamDep: 0, Weight: 1})
			}
		}},
		{"window update", func(r *rawClient) {
			for range 1000 {
				_ = r.fr.WriteWindowUpdate(0, 1)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, addr)
			tc.send(r)
			r.flush()
			r.waitFor("GOAWAY", func() bool { return len(r.goAways) > 0 })
			if code, _ := r.goAwayCode(); code != http2.ErrCodeEnhanceYourCalm {
				t.Errorf("GOAWAY %v, want ENHANCE_YOUR_CALM", code)
			}
			if !r.waitClosed() {
				t.Error("the connection stayed open after GOAWAY")
			}
		})
	}
}

// TestGracefulShutdown: GOAWAY with the largest stream id and a PING,
// then, once the PING comes back, GOAWAY with the last stream processed;
// the stream in progress completes, a stream opened after the second
// GOAWAY is not processed, and the connection closes.
func TestGracefulShutdown(t *testing.T) {
	release := make(chan struct{})
	conns := make(chan *Conn, 1)
	var served atomic.Int32
	addr := oursConns(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if r.URL.Path == "/hold" {
			<-release
		}
		_, _ = io.WriteString(w, "done")
	}), Config{}, conns)
	r := dialRaw(t, addr)
	r.get(1, "/hold")
	r.flush()
	c := <-conns
	for served.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	c.Shutdown()
	r.waitFor("the first GOAWAY", func() bool { return len(r.goAways) == 1 })
	r.mu.Lock()
	first := *r.goAways[0]
	r.mu.Unlock()
	if first.LastStreamID != 1<<31-1 || first.ErrCode != http2.ErrCodeNo {
		t.Errorf("first GOAWAY: last stream %d, %v; want %d, NO_ERROR", first.LastStreamID, first.ErrCode, 1<<31-1)
	}
	// Stream 3 crosses the first GOAWAY: it is processed.
	r.get(3, "/")
	_ = r.fr.WritePing(true, wire.DrainPingData)
	r.flush()
	r.waitFor("the second GOAWAY", func() bool { return len(r.goAways) == 2 })
	r.get(5, "/")
	r.flush()
	r.mu.Lock()
	second := *r.goAways[1]
	r.mu.Unlock()
	if second.LastStreamID != 3 || second.ErrCode != http2.ErrCodeNo {
		t.Errorf("second GOAWAY: last stream %d, %v; want 3, NO_ERROR", second.LastStreamID, second.ErrCode)
	}
	close(release)
	if !r.waitClosed() {
		t.Fatal("the connection stayed open after its streams ended")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range []uint32{1, 3} {
		if o := r.stream(id); o.Status != "200" || o.Body != "done" || !o.Ended {
			t.Errorf("stream %d: %+v, want it completed", id, *o)
		}
	}
	if o, ok := r.streams[5]; ok {
		t.Errorf("stream 5, opened after the final GOAWAY, was answered: %+v", *o)
	}
	if n := served.Load(); n != 2 {
		t.Errorf("the handler served %d streams, want 2", n)
	}
}

// TestResetCancelsHandler: the client's RST_STREAM cancels the handler's
// context, and its writes fail.
func TestResetCancelsHandler(t *testing.T) {
	started := make(chan struct{})
	done := make(chan error, 1)
	addr := ours(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		time.Sleep(10 * time.Millisecond)
		_, err := w.Write([]byte(strings.Repeat("x", 8<<10)))
		done <- err
	}), Config{})
	r := dialRaw(t, addr)
	r.get(1, "/")
	r.flush()
	<-started
	_ = r.fr.WriteRSTStream(1, http2.ErrCodeCancel)
	r.flush()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a write to a reset stream succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's context was not cancelled by RST_STREAM")
	}
}

// TestTimeouts: the idle timeout and the keepalive PING close the
// connection.
func TestTimeouts(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		addr := ours(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), Config{IdleTimeout: 200 * time.Millisecond})
		r := dialRaw(t, addr)
		r.get(1, "/")
		r.flush()
		start := time.Now()
		r.waitFor("GOAWAY", func() bool { return len(r.goAways) > 0 })
		if el := time.Since(start); el < 150*time.Millisecond {
			t.Errorf("GOAWAY after %v, before the idle timeout", el)
		}
		if code, _ := r.goAwayCode(); code != http2.ErrCodeNo {
			t.Errorf("GOAWAY %v, want NO_ERROR", code)
		}
		if !r.waitClosed() {
			t.Error("the idle connection stayed open")
		}
	})
	t.Run("keepalive", func(t *testing.T) {
		addr := ours(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), Config{PingInterval: 100 * time.Millisecond, PingTimeout: 100 * time.Millisecond})
		// The client never answers the PINGs.
		r := dialRaw(t, addr)
		if !r.waitClosed() {
			t.Error("a client that does not answer PINGs kept its connection")
		}
	})
}

// TestNoLeakAfterManyStreams: streams of every kind on connections that
// then close leave no goroutine behind.
func TestNoLeakAfterManyStreams(t *testing.T) {
	addr := ours(t, http.HandlerFunc(testHandler), Config{})
	g0 := runtime.NumGoroutine()
	for range 5 {
		r := dialRaw(t, addr)
		var id uint32 = 1
		for range 20 {
			r.get(id, "/x")
			r.headers(id+2, false, reqFields("POST", "/p")...)
			_ = r.fr.WriteData(id+2, false, []byte("abc"))
			_ = r.fr.WriteRSTStream(id+2, http2.ErrCodeCancel)
			r.get(id+4, "/noread")
			id += 6
		}
		r.flush()
		r.waitFor("the first streams", func() bool { return r.done(id - 6) })
		r.c.Close()
		<-r.closed
	}
	waitGoroutines(t, g0)
}

// TestShutdownBeforeServe: a connection shut down before it was served (a
// drain that started while it was accepted) still sends SETTINGS first,
// then GOAWAY.
func TestShutdownBeforeServe(t *testing.T) {
	addr := listen(t, func(nc net.Conn) {
		c := New(wbatch.New(nc), Config{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})})
		c.Shutdown()
		c.Serve(context.Background())
	})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_, _ = io.WriteString(nc, http2.ClientPreface)
	fr := http2.NewFramer(nc, nc)
	_ = fr.WriteSettings()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var types []http2.FrameType
	for len(types) < 3 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %v: %v", types, err)
		}
		types = append(types, f.Header().Type)
		if f.Header().Type == http2.FrameGoAway {
			break
		}
	}
	if types[0] != http2.FrameSettings || types[len(types)-1] != http2.FrameGoAway {
		t.Errorf("frames %v, want SETTINGS first and a GOAWAY", types)
	}
}

// TestContinueFromAnotherGoroutine: a request that expects 100-continue
// whose body is read on another goroutine than the handler's (as an
// upstream transport reads it) gets 100 then its response, without a race
// on the response's state.
func TestContinueFromAnotherGoroutine(t *testing.T) {
	addr := ours(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		done := make(chan []byte)
		go func() {
			b, _ := io.ReadAll(r.Body)
			done <- b
		}()
		w.Header().Set("Content-Type", "text/plain")
		b := <-done
		_, _ = w.Write(b)
	}), Config{})
	r := dialRaw(t, addr)
	r.headers(1, false, reqFields("POST", "/", "expect", "100-continue")...)
	_ = r.fr.WriteData(1, true, []byte("body"))
	r.flush()
	r.waitFor("the response", func() bool { return r.done(1) })
	r.mu.Lock()
	defer r.mu.Unlock()
	if o := r.stream(1); o.Status != "200" || o.Body != "body" {
		t.Errorf("got %+v, want 200 body", *o)
	}
}

// TestResponseEndsOnNegativeWindow: a client that lowers
// SETTINGS_INITIAL_WINDOW_SIZE after the response filled the stream's
// window leaves it negative (RFC 9113 §6.9.2); the response's end is
// then an empty DATA frame with END_STREAM, which takes no window, as
// x/net's server sends it (this server reset the stream with
// INTERNAL_ERROR: the handler's last write took a negative length).
func TestResponseEndsOnNegativeWindow(t *testing.T) {
	for name, kind := range map[string]serverKind{"ours": ours, "x/net": theirs} {
		t.Run(name, func(t *testing.T) {
			release := make(chan struct{})
			addr := kind(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write(make([]byte, wire.InitialWindow))
				w.(http.Flusher).Flush()
				<-release
			}), Config{})
			r := dialRaw(t, addr)
			r.get(1, "/")
			r.flush()
			r.waitFor("the response filling the window", func() bool { return len(r.stream(1).Body) == wire.InitialWindow })
			_ = r.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
			_ = r.fr.WritePing(false, [8]byte{1})
			r.flush()
			// The PING's ACK follows the SETTINGS' taking effect.
			r.waitFor("the PING's ACK", func() bool { return r.pings == 1 })
			close(release)
			r.waitFor("the stream's end", func() bool { return r.done(1) })
			r.mu.Lock()
			o := *r.stream(1)
			r.mu.Unlock()
			if !o.Ended || o.Reset != 0 || len(o.Body) != wire.InitialWindow {
				t.Fatalf("status %s, %d body bytes, ended %v, reset %v; want the whole body and END_STREAM", o.Status, len(o.Body), o.Ended, o.Reset)
			}
		})
	}
}
