package client

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
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/straitmesh/strait/internal/proxy/http2/wire"
)

// hostile is a raw HTTP/2 server run by script: after the preface and
// SETTINGS exchange, script reads the client's frames and answers as it
// likes.
type hostile struct {
	fr *http2.Framer
	nc net.Conn
}

// encodeHeaders encodes name, value pairs in a fresh HPACK context
// (literals only: the hostile server's blocks don't depend on each other).
func encodeHeaders(kv ...string) []byte {
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	enc.SetMaxDynamicTableSizeLimit(0)
	for i := 0; i+1 < len(kv); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1], Sensitive: true})
	}
	return b.Bytes()
}

func hostileServer(t *testing.T, script func(h *hostile)) string {
	t.Helper()
	return hostileServerWith(t, nil, script)
}

// hostileServerWith is hostileServer whose SETTINGS are settings.
func hostileServerWith(t *testing.T, settings []http2.Setting, script func(h *hostile)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(nc, preface); err != nil {
			return
		}
		h := &hostile{fr: http2.NewFramer(nc, nc), nc: nc}
		h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		if h.fr.WriteSettings(settings...) != nil {
			return
		}
		script(h)
	}()
	return ln.Addr().String()
}

// next returns the next HEADERS the client sends (answering SETTINGS
// and skipping what else comes); when the connection ends, the script
// ends (runtime.Goexit: its deferred close runs).
func (h *hostile) next() (*http2.MetaHeadersFrame, error) {
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			runtime.Goexit()
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = h.fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			return f, nil
		}
	}
}

// respond writes a response head (and body, ending the stream) on id.
func (h *hostile) respond(id uint32, status, body string, extra ...string) {
	blk := encodeHeaders(append([]string{":status", status}, extra...)...)
	_ = h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk, EndHeaders: true, EndStream: body == ""})
	if body != "" {
		_ = h.fr.WriteData(id, true, []byte(body))
	}
}

// roundTrip runs a request on c in the background.
func roundTrip(c *Conn, path string) chan result {
	ch := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest("GET", "http://backend"+path, nil)
		resp, err := c.RoundTrip(req)
		var body string
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			body, err = string(b), rerr
		}
		ch <- result{body, err}
	}()
	return ch
}

type result struct {
	body string
	err  error
}

func wait(t *testing.T, ch chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no result within 5s")
		return result{}
	}
}

// TestHostileServer: what a misbehaving server does ends only the stream
// or the connection it concerns, and never gives a response to a stream
// it was not sent on.
func TestHostileServer(t *testing.T) {
	t.Run("responses out of order go to their own streams", func(t *testing.T) {
		addr := hostileServer(t, func(h *hostile) {
			a, _ := h.next()
			b, _ := h.next()
			h.respond(b.StreamID, "200", "for "+b.PseudoValue("path"))
			h.respond(a.StreamID, "200", "for "+a.PseudoValue("path"))
			_, _ = h.next()
		})
		c := dial(t, addr, Config{})
		r1 := roundTrip(c, "/one")
		time.Sleep(20 * time.Millisecond)
		r2 := roundTrip(c, "/two")
		if got := wait(t, r1); got.err != nil || got.body != "for /one" {
			t.Errorf("/one got %+v", got)
		}
		if got := wait(t, r2); got.err != nil || got.body != "for /two" {
			t.Errorf("/two got %+v", got)
		}
	})
	t.Run("HEADERS for a stream never opened ends the connection", func(t *testing.T) {
		gotGoAway := make(chan http2.ErrCode, 1)
		addr := hostileServer(t, func(h *hostile) {
			a, _ := h.next()
			h.respond(a.StreamID+2, "200", "not yours")
			for {
				f, err := h.fr.ReadFrame()
				if err != nil {
					return
				}
				if ga, ok := f.(*http2.GoAwayFrame); ok {
					gotGoAway <- ga.ErrCode
				}
			}
		})
		c := dial(t, addr, Config{})
		got := wait(t, roundTrip(c, "/one"))
		var ce http2.ConnectionError
		if got.err == nil || !errors.As(got.err, &ce) || http2.ErrCode(ce) != http2.ErrCodeProtocol {
			t.Fatalf("stream on a connection that got a foreign HEADERS: %+v, want a PROTOCOL_ERROR connection error", got)
		}
		select {
		case code := <-gotGoAway:
			if code != http2.ErrCodeProtocol {
				t.Errorf("GOAWAY %v, want PROTOCOL_ERROR", code)
			}
		case <-time.After(5 * time.Second):
			t.Error("no GOAWAY")
		}
		if c.Usable() {
			t.Error("connection still usable")
		}
	})
	t.Run("too large HEADERS ends only its stream", func(t *testing.T) {
		addr := hostileServer(t, func(h *hostile) {
			a, err := h.next()
			if err != nil {
				return
			}
			var many []string
			for i := range 40 { // 40 fields of 50 bytes: past 1024 together
				many = append(many, fmt.Sprintf("x-f%d", i), strings.Repeat("x", 14))
			}
			h.respond(a.StreamID, "200", "", many...)
			b, err := h.next()
			if err != nil {
				return
			}
			h.respond(b.StreamID, "200", "fine")
			_, _ = h.next()
		})
		c := dial(t, addr, Config{MaxHeaderListSize: 1024})
		if got := wait(t, roundTrip(c, "/big")); !errors.Is(got.err, ErrHeaderListTooLarge) {
			t.Fatalf("too large head: %+v, want ErrHeaderListTooLarge", got)
		}
		if got := wait(t, roundTrip(c, "/next")); got.err != nil || got.body != "fine" {
			t.Fatalf("next request on the same connection: %+v", got)
		}
	})
	t.Run("one field longer than the header list size ends the connection", func(t *testing.T) {
		addr := hostileServer(t, func(h *hostile) {
			a, _ := h.next()
			h.respond(a.StreamID, "200", "", "x-big", strings.Repeat("x", 2000))
			_, _ = h.next()
		})
		c := dial(t, addr, Config{MaxHeaderListSize: 1024})
		var ce http2.ConnectionError
		if got := wait(t, roundTrip(c, "/big")); !errors.As(got.err, &ce) || http2.ErrCode(ce) != http2.ErrCodeCompression {
			t.Fatalf("a field past the limit: %+v, want a COMPRESSION_ERROR connection error", got)
		}
		if _, err := c.RoundTrip(request(t, "GET", "/", nil)); !errors.Is(err, ErrConnUnusable) {
			t.Fatalf("request after: %v, want ErrConnUnusable", err)
		}
	})
	t.Run("stream window overflow resets its stream", func(t *testing.T) {
		addr := hostileServer(t, func(h *hostile) {
			a, _ := h.next()
			_ = h.fr.WriteWindowUpdate(a.StreamID, wire.MaxWindow)
			b, _ := h.next()
			h.respond(b.StreamID, "200", "fine")
			_, _ = h.next()
		})
		c := dial(t, addr, Config{})
		var se http2.StreamError
		if got := wait(t, roundTrip(c, "/one")); !errors.As(got.err, &se) || se.Code != http2.ErrCodeFlowControl {
			t.Fatalf("overflowed stream: %+v, want FLOW_CONTROL_ERROR", got)
		}
		if got := wait(t, roundTrip(c, "/two")); got.err != nil || got.body != "fine" {
			t.Fatalf("next request on the same connection: %+v", got)
		}
	})
	t.Run("connection window overflow ends the connection", func(t *testing.T) {
		addr := hostileServer(t, func(h *hostile) {
			_, _ = h.next()
			_ = h.fr.WriteWindowUpdate(0, wire.MaxWindow)
			_, _ = h.next()
		})
		c := dial(t, addr, Config{})
		var ce http2.ConnectionError
		if got := wait(t, roundTrip(c, "/one")); !errors.As(got.err, &ce) || http2.ErrCode(ce) != http2.ErrCodeFlowControl {
			t.Fatalf("stream on an overflowed connection: %+v, want FLOW_CONTROL_ERROR", got)
		}
	})
	t.Run("DATA past the stream window resets the stream", func(t *testing.T) {
		addr := hostileServer(t, func(h *hostile) {
			a, err := h.next()
			if err != nil {
				return
			}
			_ = h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: a.StreamID, BlockFragment: encodeHeaders(":status", "200"), EndHeaders: true})
			chunk := make([]byte, 16384)
			for range 5 { // 80 KiB into a 64 KiB window
				_ = h.fr.WriteData(a.StreamID, false, chunk)
			}
			_, _ = h.next()
		})
		c := dial(t, addr, Config{StreamWindow: 65535})
		// Without the check, the body would wait for more: the deadline
		// ends it with another error.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req := request(t, "GET", "/", nil).WithContext(ctx)
		// The head has no END_STREAM: RoundTrip returns it before the
		// DATA floods in.
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		var se http2.StreamError
		if !errors.As(err, &se) || se.Code != http2.ErrCodeFlowControl {
			t.Fatalf("body past the window: %v, want FLOW_CONTROL_ERROR", err)
		}
	})
	t.Run("GOAWAY mid-flight fails only the streams above its last id", func(t *testing.T) {
		addr := hostileServer(t, func(h *hostile) {
			a, _ := h.next()
			_, _ = h.next()
			_ = h.fr.WriteGoAway(a.StreamID, http2.ErrCodeNo, nil)
			h.respond(a.StreamID, "200", "kept")
			_, _ = h.next()
		})
		c := dial(t, addr, Config{})
		r1 := roundTrip(c, "/one")
		time.Sleep(20 * time.Millisecond)
		r2 := roundTrip(c, "/two")
		if got := wait(t, r1); got.err != nil || got.body != "kept" {
			t.Errorf("stream at the last id: %+v", got)
		}
		var ga GoAwayError
		if got := wait(t, r2); !errors.As(got.err, &ga) {
			t.Errorf("stream above the last id: %+v, want GoAwayError", got)
		}
		_, err := c.RoundTrip(request(t, "GET", "/three", nil))
		if !errors.Is(err, ErrConnUnusable) {
			t.Errorf("request after GOAWAY: %v, want ErrConnUnusable", err)
		}
	})
	t.Run("RST_STREAM before the response ends only that stream", func(t *testing.T) {
		addr := hostileServer(t, func(h *hostile) {
			a, _ := h.next()
			b, _ := h.next()
			_ = h.fr.WriteRSTStream(a.StreamID, http2.ErrCodeRefusedStream)
			h.respond(a.StreamID, "200", "late") // for a reset stream: ignored
			h.respond(b.StreamID, "200", "two")
			_, _ = h.next()
		})
		c := dial(t, addr, Config{})
		r1 := roundTrip(c, "/one")
		time.Sleep(20 * time.Millisecond)
		r2 := roundTrip(c, "/two")
		var se http2.StreamError
		if got := wait(t, r1); !errors.As(got.err, &se) || se.Code != http2.ErrCodeRefusedStream {
			t.Errorf("reset stream: %+v, want REFUSED_STREAM", got)
		}
		if got := wait(t, r2); got.err != nil || got.body != "two" {
			t.Errorf("other stream: %+v", got)
		}
	})
	t.Run("body shorter than content-length fails", func(t *testing.T) {
		addr := hostileServer(t, func(h *hostile) {
			a, _ := h.next()
			h.respond(a.StreamID, "200", "abc", "content-length", "10")
			_, _ = h.next()
		})
		c := dial(t, addr, Config{})
		if got := wait(t, roundTrip(c, "/")); got.err == nil {
			t.Fatalf("short body accepted: %+v", got)
		}
	})
}

// TestPeerSettings: the server's SETTINGS are ACKed and obeyed
// (MAX_CONCURRENT_STREAMS bounds Reserve, MAX_HEADER_LIST_SIZE refuses a
// request head past it before anything is sent) and its PING is answered
// with the same data.
func TestPeerSettings(t *testing.T) {
	acked := make(chan bool, 1)
	pong := make(chan [8]byte, 1)
	addr := hostileServerWith(t, []http2.Setting{
		{ID: http2.SettingMaxConcurrentStreams, Val: 1},
		{ID: http2.SettingMaxHeaderListSize, Val: 600},
	}, func(h *hostile) {
		_ = h.fr.WritePing(false, [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
		var gotAck, gotPong bool
		for !gotAck || !gotPong {
			f, err := h.fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if f.IsAck() && !gotAck {
					gotAck = true
					acked <- true
				} else if !f.IsAck() {
					_ = h.fr.WriteSettingsAck()
				}
			case *http2.PingFrame:
				if f.IsAck() && !gotPong {
					gotPong = true
					pong <- f.Data
				}
			}
		}
		a, _ := h.next()
		h.respond(a.StreamID, "200", "ok")
		_, _ = h.next()
	})
	c := dial(t, addr, Config{})
	select {
	case <-acked:
	case <-time.After(5 * time.Second):
		t.Fatal("SETTINGS not acknowledged")
	}
	select {
	case d := <-pong:
		if d != [8]byte{1, 2, 3, 4, 5, 6, 7, 8} {
			t.Fatalf("PING answered with %v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("PING not answered")
	}
	if !c.Reserve() {
		t.Fatal("no stream within MAX_CONCURRENT_STREAMS 1")
	}
	if c.Reserve() {
		t.Fatal("a second stream past MAX_CONCURRENT_STREAMS 1")
	}
	big := request(t, "GET", "/", nil)
	big.Header.Set("X-Big", strings.Repeat("b", 600))
	if _, err := c.RoundTrip(big); err == nil || !strings.Contains(err.Error(), "past the server's limit") {
		t.Fatalf("head past the server's MAX_HEADER_LIST_SIZE: %v", err)
	}
	if !c.Reserve() {
		t.Fatal("the refused request did not give its stream back")
	}
	resp, err := c.RoundTrip(request(t, "GET", "/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); got != "ok" {
		t.Fatalf("got %q", got)
	}
}

// TestIdleTimeout: a connection without a stream for IdleTimeout closes
// and says so (OnUnusable); one with a stream open stays.
func TestIdleTimeout(t *testing.T) {
	release := make(chan struct{})
	addr := xnetServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
	}), nil)
	unusable := make(chan *Conn, 1)
	c := dial(t, addr, Config{IdleTimeout: 100 * time.Millisecond, OnUnusable: func(c *Conn) { unusable <- c }})
	held := roundTrip(c, "/hold")
	select {
	case <-unusable:
		t.Fatal("a connection with a stream open closed as idle")
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if r := wait(t, held); r.err != nil {
		t.Fatal(r.err)
	}
	select {
	case got := <-unusable:
		if got != c {
			t.Fatal("OnUnusable got another connection")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the idle connection did not close")
	}
	if _, err := c.RoundTrip(request(t, "GET", "/", nil)); !errors.Is(err, ErrConnUnusable) {
		t.Fatalf("request on the closed connection: %v, want ErrConnUnusable", err)
	}
}

// TestResponseContent: content-length and the responses without content,
// each on a hostile server that sends exactly the frames listed.
func TestResponseContent(t *testing.T) {
	tests := []struct {
		name    string
		method  string
		head    []string
		data    string // DATA with END_STREAM after the head, if not empty
		want    string // the body read
		wantErr bool
		check   func(*http.Response) string
	}{
		{name: "304 with content-length", method: "GET", head: []string{":status", "304", "content-length", "10"}, want: ""},
		{name: "204", method: "GET", head: []string{":status", "204"}, want: ""},
		{name: "HEAD with content-length", method: "HEAD", head: []string{":status", "200", "content-length", "10"}, want: ""},
		{name: "DATA on a HEAD response", method: "HEAD", head: []string{":status", "200"}, data: "x", wantErr: true},
		{name: "200 shorter than content-length", method: "GET", head: []string{":status", "200", "content-length", "10"}, wantErr: true},
		{name: "repeated equal content-length", method: "GET", head: []string{":status", "200", "content-length", "2", "content-length", "2"}, data: "ok", want: "ok",
			check: func(r *http.Response) string {
				if r.ContentLength != 2 || len(r.Header["Content-Length"]) != 1 {
					return fmt.Sprintf("content-length %d %q", r.ContentLength, r.Header["Content-Length"])
				}
				return ""
			}},
		{name: "conflicting content-length", method: "GET", head: []string{":status", "200", "content-length", "2", "content-length", "3"}, data: "ok", wantErr: true},
		{name: "connection-specific fields dropped", method: "GET", head: []string{":status", "200", "connection", "close", "keep-alive", "1", "x-kept", "1"}, data: "ok", want: "ok",
			check: func(r *http.Response) string {
				if r.Header.Get("Connection") != "" || r.Header.Get("Keep-Alive") != "" || r.Header.Get("X-Kept") != "1" {
					return fmt.Sprint("header ", r.Header)
				}
				return ""
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := hostileServer(t, func(h *hostile) {
				a, _ := h.next()
				_ = h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: a.StreamID, BlockFragment: encodeHeaders(tt.head...), EndHeaders: true, EndStream: tt.data == ""})
				if tt.data != "" {
					_ = h.fr.WriteData(a.StreamID, true, []byte(tt.data))
				}
				_, _ = h.next()
			})
			c := dial(t, addr, Config{})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			resp, err := c.RoundTrip(request(t, tt.method, "/", nil).WithContext(ctx))
			var body []byte
			if err == nil {
				// Let the DATA arrive before reading.
				time.Sleep(20 * time.Millisecond)
				body, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got %q, want an error", body)
				}
				return
			}
			if err != nil || string(body) != tt.want {
				t.Fatalf("got %q, %v; want %q", body, err, tt.want)
			}
			if tt.check != nil {
				if msg := tt.check(resp); msg != "" {
					t.Fatal(msg)
				}
			}
		})
	}
}

// TestBodyEndsOnNegativeWindow: a server that lowers
// SETTINGS_INITIAL_WINDOW_SIZE after the request body filled the stream's
// window leaves it negative (RFC 9113 §6.9.2); the body's end is then an
// empty DATA frame with END_STREAM, which takes no window, and it goes
// out (it took a negative length of the body's buffer before).
func TestBodyEndsOnNegativeWindow(t *testing.T) {
	lowered := make(chan struct{})
	ended := make(chan bool, 1)
	addr := hostileServer(t, func(h *hostile) {
		a, _ := h.next()
		got := 0
		for got < wire.InitialWindow {
			f, err := h.fr.ReadFrame()
			if err != nil {
				return
			}
			if d, ok := f.(*http2.DataFrame); ok {
				got += len(d.Data())
			}
		}
		_ = h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
		for {
			f, err := h.fr.ReadFrame()
			if err != nil {
				return
			}
			if s, ok := f.(*http2.SettingsFrame); ok && s.IsAck() {
				break
			}
		}
		close(lowered)
		for {
			f, err := h.fr.ReadFrame()
			if err != nil {
				return
			}
			if d, ok := f.(*http2.DataFrame); ok {
				ended <- len(d.Data()) == 0 && d.StreamEnded()
				break
			}
		}
		h.respond(a.StreamID, "200", "ok")
		_, _ = h.next()
	})
	c := dial(t, addr, Config{})
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write(make([]byte, wire.InitialWindow))
		<-lowered
		pw.Close()
	}()
	resp, err := c.RoundTrip(request(t, "POST", "/", pr))
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); got != "ok" {
		t.Fatalf("got %q", got)
	}
	select {
	case ok := <-ended:
		if !ok {
			t.Fatal("the body's last DATA frame is not an empty one with END_STREAM")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no DATA frame after the window went negative")
	}
}

// TestResponseValuesApart: a response's head and trailer values share
// the stream's backing array while they fit (and take one of their own
// past it); an append to one value's slice never writes over another's.
func TestResponseValuesApart(t *testing.T) {
	for _, n := range []int{1, 4, 7, 8, 12} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			addr := hostileServer(t, func(h *hostile) {
				a, _ := h.next()
				kv := []string{":status", "200"}
				for i := range n {
					kv = append(kv, fmt.Sprintf("x-h%d", i), fmt.Sprintf("v%d", i))
				}
				_ = h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: a.StreamID, BlockFragment: encodeHeaders(kv...), EndHeaders: true})
				_ = h.fr.WriteData(a.StreamID, false, []byte("body"))
				_ = h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: a.StreamID, BlockFragment: encodeHeaders("x-t0", "t0", "x-t1", "t1"), EndHeaders: true, EndStream: true})
				_, _ = h.next()
			})
			c := dial(t, addr, Config{})
			resp, err := c.RoundTrip(request(t, "GET", "/", nil))
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				k := fmt.Sprintf("X-H%d", i)
				resp.Header[k] = append(resp.Header[k], "appended")
			}
			if got := readAll(t, resp); got != "body" {
				t.Fatalf("body %q", got)
			}
			resp.Trailer["X-T0"] = append(resp.Trailer["X-T0"], "appended")
			for i := range n {
				k := fmt.Sprintf("X-H%d", i)
				if got := resp.Header[k]; len(got) != 2 || got[0] != fmt.Sprintf("v%d", i) || got[1] != "appended" {
					t.Errorf("%s: %q", k, got)
				}
			}
			if got := resp.Trailer["X-T0"]; len(got) != 2 || got[0] != "t0" {
				t.Errorf("X-T0: %q", got)
			}
			if got := resp.Trailer["X-T1"]; len(got) != 1 || got[0] != "t1" {
				t.Errorf("X-T1: %q", got)
			}
		})
	}
}
