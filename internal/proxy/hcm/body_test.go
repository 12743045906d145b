package hcm

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	bufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/buffer/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/filters/http/buffer"
	"github.com/straitmesh/strait/internal/proxy/filters/http/registry"
	routerfilter "github.com/straitmesh/strait/internal/proxy/filters/http/router"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// bodyRecFactory registers a test filter that reads request bodies: it
// logs each DecodeData (name:data:CHUNK:END) and DecodeTrailers
// (name:trailers:K=V) and answers 403 from DecodeData when the chunk is
// "stop-NAME".
type bodyRecFactory struct {
	name string
	ev   *chainEvents
}

func (f bodyRecFactory) Names() []string { return []string{f.name} }
func (f bodyRecFactory) Build(*anypb.Any, httpfilter.BuildContext) (httpfilter.Filter, error) {
	return &bodyRecFilter{name: f.name, ev: f.ev}, nil
}

type bodyRecFilter struct {
	name string
	ev   *chainEvents
}

func (f *bodyRecFilter) Name() string { return f.name }
func (f *bodyRecFilter) DecodeHeaders(s httpfilter.Stream) httpfilter.Status {
	f.ev.add(f.name + ":decode")
	return httpfilter.Continue
}

func (f *bodyRecFilter) DecodesBody(httpfilter.Stream) (int64, bool) { return 0, true }

func (f *bodyRecFilter) DecodeData(s httpfilter.Stream, chunk []byte, end bool) httpfilter.Status {
	f.ev.add(f.name + ":data:" + string(chunk) + ":" + strconv.FormatBool(end))
	if string(chunk) == "stop-"+f.name {
		s.LocalReply(403, -1, "stopped by "+f.name, "", nil)
		return httpfilter.Stop
	}
	return httpfilter.Continue
}

func (f *bodyRecFilter) DecodeTrailers(s httpfilter.Stream, h httpfilter.HeaderMap) httpfilter.Status {
	h.Range(func(k, v string) bool {
		f.ev.add(f.name + ":trailers:" + strings.ToLower(k) + "=" + v)
		return true
	})
	return httpfilter.Continue
}

var _ httpfilter.TrailersDecoder = (*bodyRecFilter)(nil)

// bodyUpstream is a backend (HTTP/1.1 and h2c) that records every
// request it gets: its body and how it was framed.
type bodyUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []bodySeen
	// fail503 answers the first request of each path 503 (a retry's
	// trigger).
	fail503 bool
	failed  map[string]bool
}

type bodySeen struct {
	path, body, te, trailer string
	contentLength           int64
	proto                   int
}

func newBodyUpstream(t *testing.T) *bodyUpstream {
	t.Helper()
	u := &bodyUpstream{failed: map[string]bool{}}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		u.mu.Lock()
		u.seen = append(u.seen, bodySeen{path: r.URL.Path, body: string(b), te: strings.Join(r.TransferEncoding, ","),
			trailer: r.Trailer.Get("X-T"), contentLength: r.ContentLength, proto: r.ProtoMajor})
		fail := u.fail503 && !u.failed[r.URL.Path]
		u.failed[r.URL.Path] = true
		u.mu.Unlock()
		if fail {
			w.WriteHeader(503)
			return
		}
		_, _ = io.WriteString(w, "got "+strconv.Itoa(len(b)))
	}))
	u.Config.Protocols = new(http.Protocols)
	u.Config.Protocols.SetHTTP1(true)
	u.Config.Protocols.SetUnencryptedHTTP2(true)
	u.Start()
	t.Cleanup(u.Close)
	return u
}

// take returns the requests seen since the last take.
func (u *bodyUpstream) take() []bodySeen {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := u.seen
	u.seen = nil
	return out
}

func (u *bodyUpstream) addr() string { return strings.TrimPrefix(u.URL, "http://") }

// rawH1 sends raw on a new connection to addr and reads one response; the
// connection is returned open for a next request.
func rawH1(t *testing.T, addr, raw string) (*http.Response, string, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, body := readH1(t, br)
	return resp, body, c, br
}

func readH1(t *testing.T, br *bufio.Reader) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// TestBodyDecodersRun: on both codecs, each chunk of a request body
// passes the body decoders in list order as it arrives, with the end flag
// on the last (then the trailers, HTTP/2), and the upstream receives the
// whole body once, with its content-length; a decoder that answers stops
// the body from going upstream.
func TestBodyDecodersRun(t *testing.T) {
	ev := &chainEvents{}
	reg, err := registry.New(bodyRecFactory{"test.a", ev}, bodyRecFactory{"test.b", ev}, routerfilter.Factory{})
	if err != nil {
		t.Fatal(err)
	}
	be := newBodyUpstream(t)
	addr := startFilterProxy(t, CodecStrait, reg, []*hcmv3.HttpFilter{{Name: "test.a"}, {Name: "test.b"}},
		[]*routev3.Route{prefixRoute("/h2/", "h2"), prefixRoute("/", "be")},
		staticCluster("be", be.addr()), h2Cluster(t, "h2", be.addr()))
	events := func(n int) string { return strings.Join(ev.waitFor(t, n), " ") }
	wantSeen := func(what string, want bodySeen) {
		t.Helper()
		got := be.take()
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s: upstream saw %+v, want once %+v", what, got, want)
		}
	}

	t.Run("HTTP/1.1 content-length", func(t *testing.T) {
		resp, body, c, br := rawH1(t, addr, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
		if resp.StatusCode != 200 || body != "got 5" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		if got, want := events(4), "test.a:decode test.b:decode test.a:data:hello:true test.b:data:hello:true"; got != want {
			t.Errorf("events\n got %s\nwant %s", got, want)
		}
		wantSeen("content-length", bodySeen{path: "/up", body: "hello", contentLength: 5, proto: 1})
		// A request without a body gets no DecodeData; the connection
		// carries it.
		if _, err := io.WriteString(c, "GET /up HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if resp, _ := readH1(t, br); resp.StatusCode != 200 {
			t.Fatalf("GET after: %d", resp.StatusCode)
		}
		if got, want := events(2), "test.a:decode test.b:decode"; got != want {
			t.Errorf("events\n got %s\nwant %s", got, want)
		}
		be.take()
	})
	t.Run("HTTP/1.1 chunked", func(t *testing.T) {
		resp, body, _, _ := rawH1(t, addr, "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2\r\nlo\r\n0\r\nX-T: dropped\r\n\r\n")
		if resp.StatusCode != 200 || body != "got 5" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		// The end of a chunked body is its last chunk, which is empty
		// (as Envoy's HTTP/1.1 codec delivers it).
		want := "test.a:decode test.b:decode test.a:data:hel:false test.b:data:hel:false test.a:data:lo:false test.b:data:lo:false test.a:data::true test.b:data::true"
		if got := events(8); got != want {
			t.Errorf("events\n got %s\nwant %s", got, want)
		}
		// Sent with its length, not chunked; the trailer is dropped
		// (forward/trailers.go).
		wantSeen("chunked", bodySeen{path: "/up", body: "hello", contentLength: 5, proto: 1})
	})
	t.Run("HTTP/1.1 empty chunked", func(t *testing.T) {
		resp, _, _, _ := rawH1(t, addr, "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
		if resp.StatusCode != 200 {
			t.Fatalf("%d", resp.StatusCode)
		}
		if got, want := events(4), "test.a:decode test.b:decode test.a:data::true test.b:data::true"; got != want {
			t.Errorf("events\n got %s\nwant %s", got, want)
		}
		wantSeen("empty chunked", bodySeen{path: "/up", contentLength: 0, proto: 1})
	})
	t.Run("HTTP/1.1 stop at the end", func(t *testing.T) {
		// test.b answers from the body's last chunk: test.a saw it, the
		// upstream never did, and the connection (whose body was read
		// whole) carries the next request.
		resp, body, c, br := rawH1(t, addr, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nstop-test.b")
		if resp.StatusCode != 403 || body != "stopped by test.b" || resp.Close {
			t.Fatalf("%d %q close=%v, want 403 from test.b, connection kept", resp.StatusCode, body, resp.Close)
		}
		if got, want := events(4), "test.a:decode test.b:decode test.a:data:stop-test.b:true test.b:data:stop-test.b:true"; got != want {
			t.Errorf("events\n got %s\nwant %s", got, want)
		}
		if _, err := io.WriteString(c, "GET /up HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if resp, _ := readH1(t, br); resp.StatusCode != 200 {
			t.Fatalf("GET after: %d", resp.StatusCode)
		}
		ev.take()
		if got := be.take(); len(got) != 1 || got[0].body != "" {
			t.Errorf("upstream saw %+v, want the GET only", got)
		}
	})
	t.Run("HTTP/1.1 stop mid-body", func(t *testing.T) {
		// test.a answers from a chunk as it arrives, before the rest of
		// the body is sent: test.b and the upstream see nothing of it,
		// and the connection closes (the rest of the body was not read).
		resp, body, _, br := rawH1(t, addr, "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nb\r\nstop-test.a\r\n")
		if resp.StatusCode != 403 || body != "stopped by test.a" || !resp.Close {
			t.Fatalf("%d %q close=%v, want 403 from test.a and connection: close", resp.StatusCode, body, resp.Close)
		}
		if got, want := events(3), "test.a:decode test.b:decode test.a:data:stop-test.a:false"; got != want {
			t.Errorf("events\n got %s\nwant %s", got, want)
		}
		if _, err := br.ReadByte(); err == nil {
			t.Error("the connection carried on after a reply mid-body")
		}
		if got := be.take(); len(got) != 0 {
			t.Errorf("upstream saw %+v, want nothing", got)
		}
	})
	t.Run("HTTP/2 with trailers", func(t *testing.T) {
		for _, path := range []string{"/h2/up", "/up"} { // to an HTTP/2 and an HTTP/1.1 upstream
			req, _ := http.NewRequest("POST", "http://"+addr+path, io.NopCloser(strings.NewReader("hello")))
			req.Trailer = http.Header{"X-T": {"v"}}
			resp, err := h2cClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != "got 5" {
				t.Fatalf("%s: %d %q", path, resp.StatusCode, b)
			}
			want := "test.a:decode test.b:decode test.a:data:hello:false test.b:data:hello:false test.a:trailers:x-t=v test.b:trailers:x-t=v"
			if got := events(6); got != want {
				t.Errorf("%s: events\n got %s\nwant %s", path, got, want)
			}
			if path == "/h2/up" {
				// Trailers cross from HTTP/2 to HTTP/2 (forward/trailers.go).
				wantSeen(path, bodySeen{path: path, body: "hello", contentLength: 5, proto: 2, trailer: "v"})
			} else {
				wantSeen(path, bodySeen{path: path, body: "hello", contentLength: 5, proto: 1})
			}
		}
	})
	t.Run("HTTP/2 without trailers", func(t *testing.T) {
		req, _ := http.NewRequest("POST", "http://"+addr+"/h2/up", strings.NewReader("hello"))
		resp, err := h2cClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// The stream's end is known after the data: an empty chunk with
		// end, as Envoy's codec delivers an empty DATA frame with
		// END_STREAM.
		want := "test.a:decode test.b:decode test.a:data:hello:false test.b:data:hello:false test.a:data::true test.b:data::true"
		if got := events(6); resp.StatusCode != 200 || got != want {
			t.Errorf("%d events\n got %s\nwant %s", resp.StatusCode, got, want)
		}
		wantSeen("h2", bodySeen{path: "/h2/up", body: "hello", contentLength: 5, proto: 2})
	})
	t.Run("HTTP/2 stop", func(t *testing.T) {
		req, _ := http.NewRequest("POST", "http://"+addr+"/up", strings.NewReader("stop-test.a"))
		resp, err := h2cClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || string(b) != "stopped by test.a" {
			t.Fatalf("%d %q", resp.StatusCode, b)
		}
		// The body's end is known only when the stream ends: test.a
		// answered from the chunk with end unset.
		if got, want := events(3), "test.a:decode test.b:decode test.a:data:stop-test.a:false"; got != want {
			t.Errorf("events\n got %s\nwant %s", got, want)
		}
		if got := be.take(); len(got) != 0 {
			t.Errorf("upstream saw %+v, want nothing", got)
		}
	})
}

// bufferFilter is an http_filters entry of the buffer filter with
// max_request_bytes max.
func bufferFilter(t testing.TB, max uint32) *hcmv3.HttpFilter {
	t.Helper()
	a, err := anypb.New(&bufferv3.Buffer{MaxRequestBytes: wrapperspb.UInt32(max)})
	if err != nil {
		t.Fatal(err)
	}
	return &hcmv3.HttpFilter{Name: buffer.Name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: a}}
}

// bufferPerRoute is a route to cluster be under prefix with the buffer
// filter's per-route config pr.
func bufferPerRoute(t testing.TB, prefix string, pr *bufferv3.BufferPerRoute) *routev3.Route {
	t.Helper()
	r := prefixRoute(prefix, "be")
	a, err := anypb.New(pr)
	if err != nil {
		t.Fatal(err)
	}
	r.TypedPerFilterConfig = map[string]*anypb.Any{buffer.Name: a}
	return r
}

// TestBufferFilter: envoy.filters.http.buffer on both codecs, to a real
// upstream: a body up to max_request_bytes goes upstream whole, once,
// with its content-length (also one that came chunked or without a
// length); one byte more is answered 413 "Payload Too Large" and the
// upstream never sees the request; a route's BufferPerRoute turns the
// filter off or gives it another limit.
func TestBufferFilter(t *testing.T) {
	be := newBodyUpstream(t)
	routes := []*routev3.Route{
		bufferPerRoute(t, "/off/", &bufferv3.BufferPerRoute{Override: &bufferv3.BufferPerRoute_Disabled{Disabled: true}}),
		bufferPerRoute(t, "/big/", &bufferv3.BufferPerRoute{Override: &bufferv3.BufferPerRoute_Buffer{
			Buffer: &bufferv3.Buffer{MaxRequestBytes: wrapperspb.UInt32(100)}}}),
		prefixRoute("/", "be"),
	}
	addr, st := startFilterProxyStats(t, CodecStrait, registry.Default(), []*hcmv3.HttpFilter{bufferFilter(t, 10)}, routes, staticCluster("be", be.addr()))
	body := func(n int) string { return strings.Repeat("x", n) }
	// Every 413 below is counted in downstream_rq_too_large.
	want413 := 0
	defer func() {
		if got := st.HTTP("test").RqTooLarge.Load(); got != uint64(want413) {
			t.Errorf("downstream_rq_too_large = %d, want %d (the 413s answered)", got, want413)
		}
	}()

	h1 := []struct {
		name, raw string
		status    int
		seen      *bodySeen // nil: the upstream sees nothing
	}{
		{"at the limit", "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n" + body(10), 200,
			&bodySeen{path: "/up", body: body(10), contentLength: 10, proto: 1}},
		{"past the limit", "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n" + body(11), 413, nil},
		{"chunked past the limit", "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nxxxxxx\r\n5\r\nxxxxx\r\n0\r\n\r\n", 413, nil},
		{"chunked gets a content-length", "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nxxxxxx\r\n4\r\nxxxx\r\n0\r\n\r\n", 200,
			&bodySeen{path: "/up", body: body(10), contentLength: 10, proto: 1}},
		{"expect 100-continue", "POST /up HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n" + body(5), 200,
			&bodySeen{path: "/up", body: body(5), contentLength: 5, proto: 1}},
		{"disabled on the route", "POST /off/x HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n" + body(50), 200,
			&bodySeen{path: "/off/x", body: body(50), contentLength: 50, proto: 1}},
		{"disabled on the route, chunked", "POST /off/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n32\r\n" + body(50) + "\r\n0\r\n\r\n", 200,
			&bodySeen{path: "/off/x", body: body(50), contentLength: -1, te: "chunked", proto: 1}},
		{"the route's limit", "POST /big/x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + body(100), 200,
			&bodySeen{path: "/big/x", body: body(100), contentLength: 100, proto: 1}},
		{"huge content-length", "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 1099511627776\r\n\r\n" + body(11), 413, nil},
		{"past the route's limit", "POST /big/x HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n" + body(101), 413, nil},
	}
	for _, tc := range h1 {
		t.Run("HTTP/1.1 "+tc.name, func(t *testing.T) {
			raw := tc.raw
			resp, got, _, br := rawH1(t, addr, raw)
			if resp.StatusCode == 100 {
				resp, got = readH1(t, br)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("%d %q, want %d", resp.StatusCode, got, tc.status)
			}
			if tc.status == 413 {
				want413++
			}
			if tc.status == 413 && got != "Payload Too Large" {
				t.Errorf("413 body %q, want Envoy's %q", got, "Payload Too Large")
			}
			seen := be.take()
			if tc.seen == nil && len(seen) != 0 || tc.seen != nil && (len(seen) != 1 || seen[0] != *tc.seen) {
				t.Errorf("upstream saw %+v, want %+v", seen, tc.seen)
			}
		})
	}
	t.Run("HTTP/1.1 hostile bodies", func(t *testing.T) {
		// A malformed chunk is 400 and the connection closes; a client
		// that leaves mid-body gets nothing sent upstream.
		resp, _, _, _ := rawH1(t, addr, "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxxx\r\nzz\r\n")
		if resp.StatusCode != 400 || !resp.Close {
			t.Errorf("malformed chunk: %d close=%v, want 400 and connection: close", resp.StatusCode, resp.Close)
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\nxxxx"); err != nil {
			t.Fatal(err)
		}
		c.Close()
		// The proxy serves the next client; the upstream saw that one only.
		if resp, _, _, _ := rawH1(t, addr, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nyy"); resp.StatusCode != 200 {
			t.Fatalf("next request: %d", resp.StatusCode)
		}
		if seen := be.take(); len(seen) != 1 || seen[0].body != "yy" {
			t.Errorf("upstream saw %+v, want the complete request only", seen)
		}
	})
	t.Run("HTTP/1.1 413 closes a connection whose body is left", func(t *testing.T) {
		resp, _, _, br := rawH1(t, addr, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"+body(1000))
		if resp.StatusCode != 413 || !resp.Close {
			t.Fatalf("%d close=%v, want 413 and connection: close", resp.StatusCode, resp.Close)
		}
		want413++
		if _, err := br.ReadByte(); err == nil {
			t.Error("the connection carried on")
		}
	})

	h2 := []struct {
		name, path, body string
		length           bool // the client sends a content-length
		status           int
	}{
		{"at the limit", "/up", body(10), true, 200},
		{"at the limit, no length", "/up", body(10), false, 200},
		{"past the limit", "/up", body(11), true, 413},
		{"past the limit, no length", "/up", body(11), false, 413},
		{"the route's limit", "/big/x", body(100), false, 200},
		{"disabled on the route", "/off/x", body(50), true, 200},
	}
	for _, tc := range h2 {
		t.Run("HTTP/2 "+tc.name, func(t *testing.T) {
			var rd io.Reader = strings.NewReader(tc.body)
			if !tc.length {
				rd = io.NopCloser(rd) // no length known: none sent
			}
			req, _ := http.NewRequest("POST", "http://"+addr+tc.path, rd)
			resp, err := h2cClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("%d %q, want %d", resp.StatusCode, b, tc.status)
			}
			if tc.status == 413 {
				want413++
			}
			seen := be.take()
			switch {
			case tc.status == 413:
				if string(b) != "Payload Too Large" || len(seen) != 0 {
					t.Errorf("413 %q, upstream saw %+v; want Envoy's body and nothing upstream", b, seen)
				}
			case len(seen) != 1 || seen[0].body != tc.body:
				t.Errorf("upstream saw %+v, want the body once", seen)
			case tc.path != "/off/x" && seen[0].contentLength != int64(len(tc.body)):
				t.Errorf("upstream content-length %d, want %d (the buffer filter sets it)", seen[0].contentLength, len(tc.body))
			}
		})
	}
}

// TestBufferedBodyRetried: a buffered body is sent again by a retry, also
// one larger than what a streamed body is kept for (forward.RetryBufferLimit),
// on both codecs and to both kinds of upstream.
func TestBufferedBodyRetried(t *testing.T) {
	be := newBodyUpstream(t)
	be.fail503 = true
	retry := func(r *routev3.Route) *routev3.Route {
		r.GetRoute().RetryPolicy = &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(2)}
		return r
	}
	addr := startFilterProxy(t, CodecStrait, registry.Default(), []*hcmv3.HttpFilter{bufferFilter(t, 4<<20)},
		[]*routev3.Route{retry(prefixRoute("/h2/", "h2")), retry(prefixRoute("/", "be"))},
		staticCluster("be", be.addr()), h2Cluster(t, "h2", be.addr()))
	big := strings.Repeat("0123456789abcdef", (3<<20)/16) // 3 MiB
	for _, path := range []string{"/h1up", "/h2/up"} {
		for _, client := range chainClients {
			t.Run(client.name+path, func(t *testing.T) {
				p := path + strings.ReplaceAll(client.name, "/", "")
				req, _ := http.NewRequest("POST", "http://"+addr+p, io.NopCloser(strings.NewReader(big)))
				resp, err := client.client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(b) != "got "+strconv.Itoa(len(big)) {
					t.Fatalf("%d %q, want the retry's 200", resp.StatusCode, b)
				}
				seen := be.take()
				if len(seen) != 2 || seen[0].body != big || seen[1].body != big {
					t.Fatalf("upstream saw %d requests, want the body twice (first answered 503)", len(seen))
				}
			})
		}
	}
}

// TestBodyBufferingKeepsTimeouts: while the HCM reads a body for the
// buffer filter, a body that stalls still meets request_timeout and
// stream_idle_timeout (408, SI for the idle one) on every codec, as a
// streamed body does (limits_codecs_test.go).
func TestBodyBufferingKeepsTimeouts(t *testing.T) {
	be, ws := limitsBackend(t), upgradeBackend(t)
	withBuffer := func(mod func(h *hcmv3.HttpConnectionManager)) func(h *hcmv3.HttpConnectionManager) {
		return func(h *hcmv3.HttpConnectionManager) {
			h.HttpFilters = append([]*hcmv3.HttpFilter{bufferFilter(t, 1<<20)}, h.HttpFilters...)
			mod(h)
		}
	}
	for _, row := range []struct {
		name  string
		hcm   func(h *hcmv3.HttpConnectionManager)
		flags string
	}{
		{"request_timeout", func(h *hcmv3.HttpConnectionManager) {
			h.RequestTimeout = durationpb.New(limitsTimeout)
			h.StreamIdleTimeout = durationpb.New(0)
		}, ""},
		{"stream_idle_timeout", func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = durationpb.New(limitsTimeout) }, "SI"},
	} {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			for _, w := range limitsWires {
				if w.websocket || w.upgrade != "" {
					continue
				}
				t.Run(w.name, func(t *testing.T) {
					t.Parallel()
					p := startLimitsProxy(t, be, ws, withBuffer(row.hcm), nil)
					c := dialLimits(t, p, w)
					c.request("/ok", nil, 100) // half the body, then nothing
					if got := c.response(); got.status != 408 || got.flags != row.flags {
						t.Fatalf("got %v, want 408 %s", got, row.flags)
					}
				})
			}
		})
	}
}

// TestBufferFilterConfig: an HCM lists the buffer filter with its Buffer
// (as an EnvoyFilter would add it), by name or by type URL; a Buffer
// without max_request_bytes, with 0, or with a field strait does not
// know is refused, naming it; so is a BufferPerRoute of the same kind.
func TestBufferFilterConfig(t *testing.T) {
	build := func(f *hcmv3.HttpFilter, routes ...*routev3.Route) error {
		_, err := Build(&hcmv3.HttpConnectionManager{
			StatPrefix: "test",
			RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
				Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: routes}}}},
			HttpFilters: []*hcmv3.HttpFilter{f, {Name: routerFilter}},
		}, nil)
		return err
	}
	if err := build(bufferFilter(t, 1024)); err != nil {
		t.Fatalf("buffer filter refused: %v", err)
	}
	byType := bufferFilter(t, 1024)
	byType.Name = "my-buffer"
	if err := build(byType); err != nil {
		t.Fatalf("buffer filter by type URL refused: %v", err)
	}
	unknown := bufferFilter(t, 1024)
	unknown.GetTypedConfig().Value = append(unknown.GetTypedConfig().Value, 0xf8, 0x01, 0x01) // field 31, varint 1
	for _, tc := range []struct {
		name string
		f    *hcmv3.HttpFilter
		want string
	}{
		{"no typed_config", &hcmv3.HttpFilter{Name: buffer.Name}, "typed_config"},
		{"no max_request_bytes", func() *hcmv3.HttpFilter {
			a, _ := anypb.New(&bufferv3.Buffer{})
			return &hcmv3.HttpFilter{Name: buffer.Name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: a}}
		}(), "max_request_bytes is required"},
		{"max_request_bytes 0", bufferFilter(t, 0), "max_request_bytes must be at least 1"},
		{"a field strait does not know", unknown, "does not know"},
	} {
		if err := build(tc.f); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), buffer.Name) {
			t.Errorf("%s: %v, want an error naming %s and %q", tc.name, err, buffer.Name, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		pr   *bufferv3.BufferPerRoute
		want string
	}{
		{"disabled false", &bufferv3.BufferPerRoute{Override: &bufferv3.BufferPerRoute_Disabled{Disabled: false}}, "disabled must be true"},
		{"buffer without max_request_bytes", &bufferv3.BufferPerRoute{Override: &bufferv3.BufferPerRoute_Buffer{Buffer: &bufferv3.Buffer{}}}, "BufferPerRoute.buffer.max_request_bytes is required"},
		{"no override", &bufferv3.BufferPerRoute{}, "needs disabled or buffer"},
	} {
		if err := build(bufferFilter(t, 1024), bufferPerRoute(t, "/", tc.pr)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// TestBodyDecoderLimit: a body decoder that sets no limit gets
// httpfilter.DefaultBodyLimit (Envoy's default
// per_connection_buffer_limit_bytes), and the last decoder that sets one
// decides, as each setDecoderBufferLimit replaces the last.
func TestBodyDecoderLimit(t *testing.T) {
	ev := &chainEvents{}
	reg, err := registry.New(bodyRecFactory{"test.a", ev}, routerfilter.Factory{}, limitFactory{"test.limit.100", 100}, limitFactory{"test.limit.20", 20})
	if err != nil {
		t.Fatal(err)
	}
	be := newBodyUpstream(t)
	for _, tc := range []struct {
		name    string
		filters []*hcmv3.HttpFilter
		ok, big int
	}{
		{"default", []*hcmv3.HttpFilter{{Name: "test.a"}}, httpfilter.DefaultBodyLimit, httpfilter.DefaultBodyLimit + 1},
		{"last sets it", []*hcmv3.HttpFilter{{Name: "test.limit.100"}, {Name: "test.a"}, {Name: "test.limit.20"}}, 20, 21},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startFilterProxy(t, CodecStrait, reg, tc.filters, []*routev3.Route{prefixRoute("/", "be")}, staticCluster("be", be.addr()))
			for n, want := range map[int]int{tc.ok: 200, tc.big: 413} {
				resp, _, _, _ := rawH1(t, addr, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: "+strconv.Itoa(n)+"\r\n\r\n"+strings.Repeat("x", n))
				if resp.StatusCode != want {
					t.Errorf("%d bytes: %d, want %d", n, resp.StatusCode, want)
				}
			}
			ev.take()
			be.take()
		})
	}
}

// limitFactory registers a body decoder named name that sets limit.
type limitFactory struct {
	name  string
	limit int64
}

func (f limitFactory) Names() []string { return []string{f.name} }
func (f limitFactory) Build(*anypb.Any, httpfilter.BuildContext) (httpfilter.Filter, error) {
	return limitFilter(f), nil
}

type limitFilter limitFactory

func (f limitFilter) Name() string                                      { return f.name }
func (f limitFilter) DecodeHeaders(httpfilter.Stream) httpfilter.Status { return httpfilter.Continue }
func (f limitFilter) DecodesBody(httpfilter.Stream) (int64, bool)       { return f.limit, true }
func (f limitFilter) DecodeData(httpfilter.Stream, []byte, bool) httpfilter.Status {
	return httpfilter.Continue
}

// TestReadBody: the body is read whole whatever its length hint says
// (none, exact, short, absurd), up to the limit and not a byte more.
func TestReadBody(t *testing.T) {
	st := &filterState{f: &Filter{chain: &chain{}}}
	body := strings.Repeat("0123456789", 10_000)
	for _, hint := range []int64{-1, int64(len(body)), 10, 1 << 62} {
		got, end, err := st.readBody(nil, strings.NewReader(body), int64(len(body)), hint, false, nil, nil)
		if end != bodyWhole || err != nil || string(got) != body {
			t.Errorf("hint %d: %d bytes, end %d, %v; want the body whole", hint, len(got), end, err)
		}
		src := strings.NewReader(body)
		if _, end, _ := st.readBody(nil, src, int64(len(body))-1, hint, false, nil, nil); end != bodyTooLarge || src.Len() != 0 {
			t.Errorf("hint %d, limit one short: end %d, %d bytes left unread; want bodyTooLarge after the last byte", hint, end, src.Len())
		}
	}
}
