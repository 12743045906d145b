package http1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"unsafe"
)

func readRequest(t testing.TB, raw string) (*Request, *Reader, error) {
	r := NewReader(strings.NewReader(raw))
	head, err := r.ReadHead(DefaultMaxHeadBytes)
	if err != nil {
		return nil, r, err
	}
	var req Request
	return &req, r, ParseRequest(head, &req)
}

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		err     error
		method  string
		path    string
		query   string
		host    string
		framing Framing
		length  int64
		close   bool
		expect  bool
		hop     []string // headers marked hop-by-hop
	}{
		{name: "get", raw: "GET /a/b?x=1 HTTP/1.1\r\nHost: h\r\n\r\n", method: "GET", path: "/a/b", query: "?x=1", host: "h"},
		{name: "bare LF", raw: "GET / HTTP/1.1\nHost: h\n\n", method: "GET", path: "/", host: "h"},
		{name: "leading CRLF", raw: "\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", method: "GET", path: "/", host: "h"},
		{name: "content-length", raw: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello", method: "POST", path: "/", host: "h", framing: FramingLength, length: 5},
		{name: "same content-length twice", raw: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", method: "POST", path: "/", host: "h", framing: FramingLength, length: 5},
		{name: "zero length", raw: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", method: "POST", path: "/", host: "h", framing: FramingNone},
		{name: "chunked", raw: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n", method: "POST", path: "/", host: "h", framing: FramingChunked, length: -1, hop: []string{"Transfer-Encoding"}},
		{name: "http/1.0 closes", raw: "GET / HTTP/1.0\r\n\r\n", method: "GET", path: "/", close: true},
		{name: "http/1.0 keep-alive", raw: "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", method: "GET", path: "/", hop: []string{"Connection"}},
		{name: "connection close and named hop", raw: "GET / HTTP/1.1\r\nHost: h\r\nConnection: close, X-Foo\r\nX-Foo: 1\r\nX-Bar: 2\r\n\r\n", method: "GET", path: "/", host: "h", close: true, hop: []string{"Connection", "X-Foo"}},
		{name: "expect", raw: "PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n", method: "PUT", path: "/", host: "h", framing: FramingLength, length: 3, expect: true},
		{name: "absolute form", raw: "GET http://Example.com:8080?q HTTP/1.1\r\nHost: other\r\n\r\n", method: "GET", path: "/", query: "?q", host: "Example.com:8080"},
		{name: "absolute form path", raw: "GET http://e.com/p/q HTTP/1.1\r\nHost: e.com\r\n\r\n", method: "GET", path: "/p/q", host: "e.com"},
		{name: "asterisk", raw: "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", method: "OPTIONS", path: "*", host: "h"},
		{name: "OWS", raw: "GET / HTTP/1.1\r\nHost:  h \t\r\n\r\n", method: "GET", path: "/", host: "h"},

		{name: "no host", raw: "GET / HTTP/1.1\r\n\r\n", err: ErrMalformed},
		{name: "two hosts", raw: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", err: ErrMalformed},
		{name: "bad host", raw: "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", err: ErrMalformed},
		{name: "http/2", raw: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", err: ErrMalformed},
		{name: "http/1.2", raw: "GET / HTTP/1.2\r\nHost: h\r\n\r\n", err: ErrMalformed},
		{name: "no version", raw: "GET /\r\nHost: h\r\n\r\n", err: ErrMalformed},
		{name: "bad method", raw: "G(T / HTTP/1.1\r\nHost: h\r\n\r\n", err: ErrMalformed},
		{name: "two spaces", raw: "GET  / HTTP/1.1\r\nHost: h\r\n\r\n", err: ErrMalformed},
		{name: "connect", raw: "CONNECT h:443 HTTP/1.1\r\nHost: h\r\n\r\n", err: ErrMalformed},
		{name: "space before colon", raw: "GET / HTTP/1.1\r\nHost : h\r\n\r\n", err: ErrMalformed},
		{name: "obs-fold", raw: "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n", err: ErrMalformed},
		{name: "bare CR in value", raw: "GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n", err: ErrMalformed},
		{name: "NUL in value", raw: "GET / HTTP/1.1\r\nHost: h\r\nX: a\x00b\r\n\r\n", err: ErrMalformed},
		{name: "no colon", raw: "GET / HTTP/1.1\r\nHost: h\r\nXY\r\n\r\n", err: ErrMalformed},
		{name: "CL and TE", raw: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", err: ErrMalformed},
		{name: "different CLs", raw: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", err: ErrMalformed},
		{name: "negative CL", raw: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -3\r\n\r\n", err: ErrMalformed},
		{name: "CL list", raw: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 3\r\n\r\n", err: ErrMalformed},
		{name: "huge CL", raw: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999\r\n\r\n", err: ErrMalformed},
		{name: "gzip TE", raw: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", err: ErrMalformed},
		{name: "TE twice", raw: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", err: ErrMalformed},
		{name: "chunked http/1.0", raw: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", err: ErrMalformed},
		{name: "truncated", raw: "GET / HTTP/1.1\r\nHost: h\r\n", err: io.ErrUnexpectedEOF},
		{name: "empty", raw: "", err: io.EOF},
		{name: "too large", raw: "GET / HTTP/1.1\r\nHost: h\r\nX: " + strings.Repeat("a", DefaultMaxHeadBytes) + "\r\n\r\n", err: ErrHeaderTooLarge},
		{name: "too many", raw: "GET / HTTP/1.1\r\nHost: h\r\n" + strings.Repeat("X: a\r\n", MaxHeaders) + "\r\n", err: ErrTooManyHeaders},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _, err := readRequest(t, tc.raw)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(req.Method) != tc.method || string(req.Path) != tc.path || string(req.Query) != tc.query || string(req.Host) != tc.host {
				t.Errorf("method %q path %q query %q host %q", req.Method, req.Path, req.Query, req.Host)
			}
			if req.Framing != tc.framing || (tc.framing != FramingNone && req.ContentLength != tc.length) {
				t.Errorf("framing %d length %d, want %d %d", req.Framing, req.ContentLength, tc.framing, tc.length)
			}
			if req.Close != tc.close || req.Expect100 != tc.expect {
				t.Errorf("close %v expect %v", req.Close, req.Expect100)
			}
			var hop []string
			for _, h := range req.Headers {
				if h.Hop {
					hop = append(hop, string(h.Name))
				}
			}
			if strings.Join(hop, ",") != strings.Join(tc.hop, ",") {
				t.Errorf("hop-by-hop %q, want %q", hop, tc.hop)
			}
		})
	}
}

func TestParseResponse(t *testing.T) {
	tests := []struct {
		raw     string
		head    bool
		status  int
		framing Framing
		length  int64
		close   bool
		err     error
	}{
		{raw: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", status: 200, framing: FramingLength, length: 3},
		{raw: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", head: true, status: 200, framing: FramingNone, length: 3},
		{raw: "HTTP/1.1 204 No Content\r\n\r\n", status: 204, framing: FramingNone},
		{raw: "HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n", status: 304, framing: FramingNone, length: 9},
		{raw: "HTTP/1.1 200 OK\r\n\r\n", status: 200, framing: FramingClose},
		{raw: "HTTP/1.1 200\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", status: 200, framing: FramingChunked, length: -1},
		{raw: "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", status: 200, framing: FramingLength, close: true},
		{raw: "HTTP/1.1 100 Continue\r\n\r\n", status: 100, framing: FramingNone},
		{raw: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n", status: 200, framing: FramingLength, length: 1, close: true},
		{raw: "HTTP/1.1 20 OK\r\n\r\n", err: ErrMalformed},
		{raw: "HTTP/1.1 600 OK\r\n\r\n", err: ErrMalformed},
		{raw: "HTTP/1.1 200OK\r\n\r\n", err: ErrMalformed},
		{raw: "ICY 200 OK\r\n\r\n", err: ErrMalformed},
	}
	for _, tc := range tests {
		r := NewReader(strings.NewReader(tc.raw))
		head, err := r.ReadHead(DefaultMaxHeadBytes)
		if err != nil {
			t.Fatalf("%q: %v", tc.raw, err)
		}
		var resp Response
		err = ParseResponse(head, &resp, tc.head)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%q: err = %v, want %v", tc.raw, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.raw, err)
			continue
		}
		if resp.Status != tc.status || resp.Framing != tc.framing || resp.Close != tc.close ||
			(tc.length != 0 && resp.ContentLength != tc.length) {
			t.Errorf("%q: status %d framing %d length %d close %v", tc.raw, resp.Status, resp.Framing, resp.ContentLength, resp.Close)
		}
	}
}

func TestChunked(t *testing.T) {
	tests := []struct {
		raw, body, trailer string
		err                error
	}{
		{raw: "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nNEXT", body: "hello world"},
		{raw: "5;ext=1\r\nhello\r\n0\r\nX-Sum: 1\r\n\r\n", body: "hello", trailer: "X-Sum: 1\r\n"},
		{raw: "A \r\n0123456789\r\n0\n\n", body: "0123456789"},
		{raw: "5\r\nhelloXX0\r\n\r\n", err: ErrMalformed},
		{raw: "x\r\n", err: ErrMalformed},
		{raw: "fffffffffffffffff\r\n", err: ErrMalformed},
		{raw: "5\r\nhel", err: io.ErrUnexpectedEOF},
		{raw: "0\r\nBad Trailer\r\n\r\n", err: ErrMalformed},
		{raw: strings.Repeat("0", 5000), err: ErrLineTooLong},
	}
	for _, tc := range tests {
		r := NewReader(strings.NewReader(tc.raw))
		var c ChunkedReader
		c.Reset(r)
		got, err := io.ReadAll(&c)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%.20q: err = %v, want %v", tc.raw, err, tc.err)
			}
			continue
		}
		if err != nil || string(got) != tc.body || string(c.Trailer) != tc.trailer {
			t.Errorf("%q: body %q trailer %q err %v", tc.raw, got, c.Trailer, err)
		}
		if strings.HasSuffix(tc.raw, "NEXT") && string(r.Buffered()) != "NEXT" {
			t.Errorf("%q: left %q", tc.raw, r.Buffered())
		}
	}
}

func TestFrameChunkRoundTrip(t *testing.T) {
	var out bytes.Buffer
	buf := make([]byte, ChunkHeadroom+300+2)
	for _, n := range []int{1, 15, 16, 255, 256, 300} {
		copy(buf[ChunkHeadroom:], strings.Repeat("z", n))
		out.Write(FrameChunk(buf, n))
	}
	out.Write(AppendLastChunk(nil, []byte("X-T: 1\r\n")))
	tr, err := io.ReadAll(newChunkedStd(out.Bytes()))
	if err != nil || len(tr) != 1+15+16+255+256+300 {
		t.Fatalf("net/http read %d bytes, err %v", len(tr), err)
	}
}

// newChunkedStd decodes with net/http's reader, as an independent check.
func newChunkedStd(b []byte) io.Reader {
	resp, err := http.ReadResponse(bufio.NewReader(io.MultiReader(
		strings.NewReader("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), bytes.NewReader(b))), nil)
	if err != nil {
		return io.MultiReader()
	}
	return resp.Body
}

// TestPipelined checks that back-to-back heads and bodies in one read are
// split correctly, and that a head split across reads is found.
func TestPipelined(t *testing.T) {
	raw := "POST /1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET /2 HTTP/1.1\r\nHost: h\r\n\r\n"
	r := NewReader(&oneByteReader{s: raw})
	for i, want := range []string{"/1", "/2"} {
		head, err := r.ReadHead(DefaultMaxHeadBytes)
		if err != nil {
			t.Fatal(err)
		}
		var req Request
		if err := ParseRequest(head, &req); err != nil {
			t.Fatal(err)
		}
		if string(req.Path) != want {
			t.Fatalf("request %d path %q", i, req.Path)
		}
		if req.Framing == FramingLength {
			b, err := io.ReadAll(&LengthReader{R: r, Left: req.ContentLength})
			if err != nil || string(b) != "abc" {
				t.Fatalf("body %q %v", b, err)
			}
		}
	}
	if _, err := r.ReadHead(DefaultMaxHeadBytes); !errors.Is(err, io.EOF) {
		t.Fatalf("err = %v, want EOF", err)
	}
}

type oneByteReader struct{ s string }

func (o *oneByteReader) Read(p []byte) (int, error) {
	if len(o.s) == 0 {
		return 0, io.EOF
	}
	p[0] = o.s[0]
	o.s = o.s[1:]
	return 1, nil
}

// FuzzParseRequest feeds arbitrary bytes through the request path of the
// codec: head, parse, body. It must never panic, and what it accepts must
// be self-consistent.
//
//	go test -run '^$' -fuzz FuzzParseRequest -fuzztime 60s ./internal/proxy/http1/
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
		"POST /x?y HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc",
		"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3;x\r\nabc\r\n0\r\nT: 1\r\n\r\n",
		"GET http://a:1/b HTTP/1.0\r\nConnection: keep-alive, X\r\nX: 1\r\n\r\n",
		"\r\nGET * HTTP/1.1\nHost: h\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		defer r.Release()
		var req Request
		var ch ChunkedReader
		for i := 0; i < 4; i++ {
			head, err := r.ReadHead(4 << 10)
			if err != nil {
				return
			}
			if err := ParseRequest(head, &req); err != nil {
				return
			}
			if req.Minor == 1 && !req.HasHost || len(req.Path) == 0 {
				t.Fatalf("accepted %q without host or path", head)
			}
			if len(req.Headers) > MaxHeaders {
				t.Fatalf("%d headers", len(req.Headers))
			}
			switch req.Framing {
			case FramingLength:
				if req.ContentLength <= 0 {
					t.Fatalf("length framing with %d", req.ContentLength)
				}
				n, err := io.Copy(io.Discard, &LengthReader{R: r, Left: req.ContentLength})
				if err != nil {
					return
				}
				if n != req.ContentLength {
					t.Fatalf("read %d of %d", n, req.ContentLength)
				}
			case FramingChunked:
				ch.Reset(r)
				if _, err := io.Copy(io.Discard, &ch); err != nil {
					return
				}
			}
		}
	})
}

// FuzzParseResponse does the same for response heads.
func FuzzParseResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), false)
	f.Add([]byte("HTTP/1.0 404 \r\nConnection: keep-alive\r\n\r\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, head bool) {
		r := NewReader(bytes.NewReader(data))
		defer r.Release()
		h, err := r.ReadHead(4 << 10)
		if err != nil {
			return
		}
		var resp Response
		if ParseResponse(h, &resp, head) == nil && (resp.Status < 100 || resp.Status > 599) {
			t.Fatalf("status %d", resp.Status)
		}
	})
}

// slowReader returns its input one byte per Read, like a slow client.
type slowReader struct{ s string }

func (r *slowReader) Read(p []byte) (int, error) {
	if len(r.s) == 0 {
		return 0, io.EOF
	}
	p[0] = r.s[0]
	r.s = r.s[1:]
	return 1, nil
}

// TestHTTP09Refused: a request line without a version is refused as soon
// as it is complete, not held waiting for a head that never comes.
func TestHTTP09Refused(t *testing.T) {
	r := NewReader(&slowReader{"GET /\r\n"}) // then EOF: ReadHead would say ErrUnexpectedEOF
	defer r.Release()
	if _, err := r.ReadRequestHead(DefaultMaxHeadBytes); !errors.Is(err, ErrMalformed) {
		t.Fatalf("got %v, want ErrMalformed once the line is complete", err)
	}
	r2 := NewReader(&slowReader{"GET / HTTP/1.1\r\nHost: h\r\n\r\n"})
	defer r2.Release()
	if _, err := r2.ReadRequestHead(DefaultMaxHeadBytes); err != nil {
		t.Fatalf("a valid head trickling in: %v", err)
	}
}

// TestShrinkAfterLargeHead: a connection whose head grew the buffer gets
// back to the default size, so an idle connection holds 8 KiB.
func TestShrinkAfterLargeHead(t *testing.T) {
	raw := "GET / HTTP/1.1\r\nHost: h\r\nX: " + strings.Repeat("a", 40<<10) + "\r\n\r\nGET /next"
	r := NewReader(strings.NewReader(raw))
	defer r.Release()
	if _, err := r.ReadHead(DefaultMaxHeadBytes); err != nil {
		t.Fatal(err)
	}
	if len(r.buf) <= DefaultBufferSize {
		t.Fatalf("buffer %d: the large head should have grown it", len(r.buf))
	}
	r.Shrink()
	if len(r.buf) != DefaultBufferSize || r.big || string(r.Buffered()) != "GET /next" {
		t.Fatalf("after Shrink: %d bytes, big %v, buffered %q", len(r.buf), r.big, r.Buffered())
	}
}

func TestUserinfoAndHost(t *testing.T) {
	req, _, err := readRequest(t, "GET http://user:pw@example.com:8080/x HTTP/1.1\r\nHost: example.com\r\n\r\n")
	if err != nil || string(req.Authority) != "example.com:8080" || string(req.Host) != "example.com:8080" {
		t.Fatalf("authority %q host %q %v, want the userinfo dropped", req.Authority, req.Host, err)
	}
	req, _, err = readRequest(t, "GET / HTTP/1.1\r\nHost: h\r\nConnection: Host, X-A\r\nX-A: 1\r\n\r\n")
	if err != nil || req.Headers[0].Hop || !req.Headers[2].Hop {
		t.Fatalf("Host hop %v, X-A hop %v (%v): Connection must not strip Host", req.Headers[0].Hop, req.Headers[2].Hop, err)
	}
	if _, _, err := readRequest(t, "GET / HTTP/1.1\r\nHost: a\"b\r\n\r\n"); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Host with '\"': %v, want ErrMalformed", err)
	}
}

// validValue, eight bytes at a time, agrees with the byte-by-byte
// check for every byte value at every position of values of every
// length up to 24, the rest of the value being each of a plain
// character, a tab and obs-text.
func TestValidValue(t *testing.T) {
	for n := 1; n <= 72; n++ {
		for _, fill := range []byte{'a', '\t', 0x80, 0xff} {
			for pos := range n {
				for c := range 256 {
					v := bytes.Repeat([]byte{fill}, n)
					v[pos] = byte(c)
					want := (c >= ' ' || c == '\t') && c != 0x7f
					if got := validValue(v); got != want {
						t.Fatalf("validValue(%q) = %v, want %v", v, got, want)
					}
				}
			}
		}
	}
	// A head with a control character deep in a long value is refused.
	long := strings.Repeat("A", 301)
	for _, c := range []string{"\x00", "\x01", "\x1f", "\x7f", "\r"} {
		if _, _, err := readRequest(t, "GET / HTTP/1.1\r\nHost: a\r\nX-Envoy-Peer-Metadata: "+long+c+long+"\r\n\r\n"); !errors.Is(err, ErrMalformed) {
			t.Errorf("value with %q: %v, want ErrMalformed", c, err)
		}
	}
	if _, _, err := readRequest(t, "GET / HTTP/1.1\r\nHost: a\r\nX-Envoy-Peer-Metadata: "+long+"\t\x80\xff"+long+"\r\n\r\n"); err != nil {
		t.Errorf("value with a tab and obs-text: %v", err)
	}
}

// BenchmarkParseMeshRequest parses the head of a request between two
// sidecars: what an application sends plus Istio's exchange headers
// (~350 bytes of x-envoy-peer-metadata and -id).
//
//	go test -run '^$' -bench ParseMeshRequest -benchmem ./internal/proxy/http1/
func BenchmarkParseMeshRequest(b *testing.B) {
	raw := "GET /api/v1/items?limit=10 HTTP/1.1\r\nHost: svc.ns.svc.cluster.local\r\nUser-Agent: wrk\r\nAccept: */*\r\n" +
		"X-Request-Id: 3b1f0c5e-7d4b-4a8e-9a41-1f6c2c0d9e11\r\n" +
		"X-Envoy-Peer-Metadata-Id: sidecar~10.0.0.1~client-1.bench~bench.svc.cluster.local\r\n" +
		"X-Envoy-Peer-Metadata: " + strings.Repeat("ChsKDkFQUF9DT05UQUlORVJTEgkaB2NsaWVudAo", 8) + "\r\n\r\n"
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	var req Request
	head := []byte(raw)
	for range b.N {
		if err := ParseRequest(head, &req); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLookupSingleValueAliases: Lookup of a field with one value returns
// that value without copying it (it aliases the head's buffer, as its doc
// says); two values are joined with ",".
func TestLookupSingleValueAliases(t *testing.T) {
	head := []byte("GET / HTTP/1.1\r\nHost: h\r\nX-One: alpha\r\nX-Two: a\r\nX-Two: b\r\n\r\n")
	var req Request
	if err := ParseRequest(head, &req); err != nil {
		t.Fatal(err)
	}
	v, ok := req.Headers.Lookup("x-one")
	if !ok || v != "alpha" {
		t.Fatalf("Lookup(x-one) = %q, %v", v, ok)
	}
	if at := bytes.Index(head, []byte("alpha")); unsafe.StringData(v) != &head[at] {
		t.Error("Lookup copied a single value instead of returning the buffer's bytes")
	}
	if v, ok := req.Headers.Lookup("X-Two"); !ok || v != "a,b" {
		t.Errorf("Lookup(X-Two) = %q, %v; want \"a,b\"", v, ok)
	}
	if v, ok := req.Headers.Lookup("x-none"); ok || v != "" {
		t.Errorf("Lookup(x-none) = %q, %v", v, ok)
	}
}
