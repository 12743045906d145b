package server

import (
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// testHandler answers by path: /status/N with N, /trailers with trailers
// (announced and with http.TrailerPrefix), /grpc in gRPC's trailers-only
// form, /noread holds the stream without reading its body; anything else
// echoes the method, path, cookie, request trailer and body length.
func testHandler(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/noread" {
		<-r.Context().Done()
		return
	}
	body, err := io.ReadAll(r.Body)
	h := w.Header()
	h.Set("Content-Type", "text/plain")
	if err != nil {
		w.WriteHeader(599)
		return
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/status/"):
		var code int
		_, _ = fmt.Sscan(r.URL.Path[len("/status/"):], &code)
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "status")
	case r.URL.Path == "/trailers":
		h.Set("Trailer", "X-Announced")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, "with trailers")
		w.(http.Flusher).Flush()
		h.Set("X-Announced", "a")
		h.Set(http.TrailerPrefix+"Grpc-Status", "0")
	case r.URL.Path == "/grpc":
		h.Set("Content-Type", "application/grpc")
		h.Set("Grpc-Status", "14")
		w.WriteHeader(200)
	case r.URL.Path == "/big":
		h.Set("X-Custom", "big")
		_, _ = w.Write([]byte(strings.Repeat("0123456789abcdef", 20<<10)))
	default:
		h.Set("X-Custom", fmt.Sprintf("%s %s cookie=%q trailer=%q host=%q", r.Method, r.URL.RequestURI(), r.Header.Get("Cookie"), r.Trailer.Get("X-Req"), r.Host))
		_, _ = fmt.Fprintf(w, "body %d", len(body))
	}
}

// diffCase is a request sequence for both servers; ids are the streams
// whose outcome is compared; conn says the sequence ends the connection
// (the GOAWAY code is compared instead).
type diffCase struct {
	name  string
	cfg   Config
	send  func(r *rawClient)
	ids   []uint32
	conn  bool
	extra []http2.Setting
}

func reqFields(method, path string, extra ...string) []string {
	return append([]string{":method", method, ":scheme", "http", ":authority", "example.com", ":path", path}, extra...)
}

var diffCases = []diffCase{
	{name: "get", send: func(r *rawClient) { r.get(1, "/x?q=1") }, ids: []uint32{1}},
	{name: "big response", extra: []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 1 << 30}}, send: func(r *rawClient) {
		_ = r.fr.WriteWindowUpdate(0, 1<<30)
		r.get(1, "/big")
	}, ids: []uint32{1}},
	{name: "several streams", send: func(r *rawClient) {
		r.get(1, "/a")
		r.get(3, "/trailers")
		r.get(5, "/grpc")
		r.get(7, "/status/404")
	}, ids: []uint32{1, 3, 5, 7}},
	{name: "post with content-length", send: func(r *rawClient) {
		r.headers(1, false, reqFields("POST", "/p", "content-length", "5")...)
		_ = r.fr.WriteData(1, true, []byte("hello"))
	}, ids: []uint32{1}},
	{name: "post without content-length", send: func(r *rawClient) {
		r.headers(1, false, reqFields("POST", "/p")...)
		_ = r.fr.WriteData(1, false, []byte("abc"))
		_ = r.fr.WriteData(1, true, []byte("def"))
	}, ids: []uint32{1}},
	{name: "request trailers", send: func(r *rawClient) {
		r.headers(1, false, reqFields("POST", "/p", "trailer", "x-req")...)
		_ = r.fr.WriteData(1, false, []byte("abc"))
		r.headers(1, true, "x-req", "tv")
	}, ids: []uint32{1}},
	{name: "trailers", send: func(r *rawClient) { r.get(1, "/trailers") }, ids: []uint32{1}},
	{name: "grpc trailers-only", send: func(r *rawClient) { r.get(1, "/grpc") }, ids: []uint32{1}},
	{name: "204", send: func(r *rawClient) { r.get(1, "/status/204") }, ids: []uint32{1}},
	{name: "head", send: func(r *rawClient) { r.headers(1, true, reqFields("HEAD", "/h")...) }, ids: []uint32{1}},
	{name: "cookies merged", send: func(r *rawClient) { r.get(1, "/c", "cookie", "a=1", "cookie", "b=2") }, ids: []uint32{1}},
	{name: "host header", send: func(r *rawClient) {
		r.headers(1, true, ":method", "GET", ":scheme", "http", ":path", "/h", "host", "h.example")
	}, ids: []uint32{1}},
	{name: "expect 100-continue", send: func(r *rawClient) {
		r.headers(1, false, reqFields("POST", "/p", "expect", "100-continue", "content-length", "2")...)
		_ = r.fr.WriteData(1, true, []byte("ok"))
	}, ids: []uint32{1}},
	{name: "connect", send: func(r *rawClient) {
		r.headers(1, true, ":method", "CONNECT", ":authority", "example.com:443")
	}, ids: []uint32{1}},
	{name: "missing path", send: func(r *rawClient) {
		r.headers(1, true, ":method", "GET", ":scheme", "http", ":authority", "a")
	}, ids: []uint32{1}},
	{name: "missing method", send: func(r *rawClient) {
		r.headers(1, true, ":scheme", "http", ":authority", "a", ":path", "/")
	}, ids: []uint32{1}},
	{name: "bad scheme", send: func(r *rawClient) {
		r.headers(1, true, ":method", "GET", ":scheme", "ftp", ":authority", "a", ":path", "/")
	}, ids: []uint32{1}},
	{name: "relative path", send: func(r *rawClient) { r.get(1, "x") }, ids: []uint32{1}},
	{name: "duplicate path", send: func(r *rawClient) { r.get(1, "/a", ":path", "/b") }, ids: []uint32{1}},
	{name: "pseudo after regular", send: func(r *rawClient) {
		r.headers(1, true, ":method", "GET", ":scheme", "http", "x-a", "1", ":path", "/")
	}, ids: []uint32{1}},
	{name: "uppercase name", send: func(r *rawClient) { r.get(1, "/", "X-Upper", "1") }, ids: []uint32{1}},
	{name: "unknown pseudo", send: func(r *rawClient) { r.get(1, "/", ":foo", "1") }, ids: []uint32{1}},
	{name: "response pseudo", send: func(r *rawClient) { r.get(1, "/", ":status", "200") }, ids: []uint32{1}},
	{name: "extended connect", send: func(r *rawClient) {
		r.headers(1, true, reqFields("CONNECT", "/ws", ":protocol", "websocket")...)
	}, ids: []uint32{1}},
	{name: "connect with path", send: func(r *rawClient) { r.headers(1, true, reqFields("CONNECT", "/")...) }, ids: []uint32{1}},
	{name: "host differs from authority", send: func(r *rawClient) { r.get(1, "/", "host", "other.example") }, ids: []uint32{1}},
	{name: "userinfo in authority", send: func(r *rawClient) {
		r.headers(1, true, ":method", "GET", ":scheme", "http", ":authority", "u@a", ":path", "/")
	}, ids: []uint32{1}},
	{name: "self-dependent stream", send: func(r *rawClient) {
		r.hbuf.Reset()
		_ = r.fr.WritePriority(1, http2.PriorityParam{StreamDep: 1})
	}, ids: []uint32{1}},
	{name: "header list too large", cfg: Config{MaxHeaderListSize: 1 << 10}, send: func(r *rawClient) {
		var fields []string
		for i := range 20 {
			fields = append(fields, fmt.Sprintf("x-big-%d", i), strings.Repeat("b", 100))
		}
		r.get(1, "/", fields...)
	}, ids: []uint32{1}},
	{name: "content-length exceeded", send: func(r *rawClient) {
		r.headers(1, false, reqFields("POST", "/noread", "content-length", "3")...)
		_ = r.fr.WriteData(1, true, []byte("hello"))
	}, ids: []uint32{1}},
	{name: "data past the stream window", cfg: Config{StreamWindow: 1 << 14}, send: func(r *rawClient) {
		r.headers(1, false, reqFields("POST", "/noread")...)
		_ = r.fr.WriteData(1, false, make([]byte, 1<<14))
		_ = r.fr.WriteData(1, false, []byte("x"))
	}, ids: []uint32{1}},
	{name: "data after end stream", send: func(r *rawClient) {
		r.get(1, "/noread")
		_ = r.fr.WriteData(1, true, []byte("x"))
	}, ids: []uint32{1}},
	{name: "headers after end stream", send: func(r *rawClient) {
		r.get(1, "/noread")
		r.headers(1, true, "x-late", "1")
	}, ids: []uint32{1}},
	{name: "data on idle stream", send: func(r *rawClient) { _ = r.fr.WriteData(1, true, []byte("x")) }, conn: true},
	{name: "reset idle stream", send: func(r *rawClient) { _ = r.fr.WriteRSTStream(1, http2.ErrCodeCancel) }, conn: true},
	{name: "window update on idle stream", send: func(r *rawClient) { _ = r.fr.WriteWindowUpdate(5, 1) }, conn: true},
	{name: "even stream id", send: func(r *rawClient) { r.get(2, "/") }, conn: true},
	{name: "stream id going down", send: func(r *rawClient) { r.get(5, "/noread"); r.get(3, "/") }, conn: true},
	{name: "connection window overflow", send: func(r *rawClient) { _ = r.fr.WriteWindowUpdate(0, 1<<31-1) }, conn: true},
	{name: "push promise", send: func(r *rawClient) {
		_ = r.fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, EndHeaders: true})
	}, conn: true},
	{name: "initial window too large", extra: []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 1 << 31}}, send: func(*rawClient) {}, conn: true},
	{name: "ping on a stream", send: func(r *rawClient) {
		// The framer refuses to write it: the raw frame.
		_, _ = r.bw.Write([]byte{0, 0, 8, 0x6, 0, 0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8})
	}, conn: true},
}

// TestDifferentialXNetServer sends the same frames to this server and to
// x/net/http2's and wants the same outcome: each stream's status,
// compared header fields, body, trailers and reset code, or the
// connection's GOAWAY code.
func TestDifferentialXNetServer(t *testing.T) {
	for _, tc := range diffCases {
		t.Run(tc.name, func(t *testing.T) {
			got := runCase(t, ours, tc)
			want := runCase(t, theirs, tc)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("this server:\n%s\nx/net's:\n%s", got, want)
			}
		})
	}
}

// runCase runs tc against a server of kind and describes what the client
// saw.
func runCase(t *testing.T, kind serverKind, tc diffCase) string {
	t.Helper()
	addr := kind(t, http.HandlerFunc(testHandler), tc.cfg)
	r := dialRaw(t, addr, tc.extra...)
	tc.send(r)
	r.flush()
	if tc.conn {
		r.waitFor("GOAWAY", func() bool { return len(r.goAways) > 0 })
		code, _ := r.goAwayCode()
		return fmt.Sprintf("GOAWAY %v", code)
	}
	r.waitFor("the streams' end", func() bool {
		for _, id := range tc.ids {
			if !r.done(id) {
				return false
			}
		}
		return true
	})
	time.Sleep(20 * time.Millisecond) // a reset that follows a response
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, id := range tc.ids {
		fmt.Fprintf(&b, "stream %d: %+v\n", id, *r.stream(id))
	}
	if len(r.goAways) > 0 {
		fmt.Fprintf(&b, "GOAWAY %v\n", r.goAways[0].ErrCode)
	}
	return b.String()
}
