package http1

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// serializeRequest writes req's head back out: the request line and the
// fields as parsed. lf selects bare LF line endings and odd spacing
// around values, which must parse to the same request.
func serializeRequest(req *Request, lf bool) []byte {
	eol := "\r\n"
	if lf {
		eol = "\n"
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.%d%s", req.Method, req.Target, req.Minor, eol)
	for _, h := range req.Headers {
		if lf {
			fmt.Fprintf(&b, "%s:\t %s \t%s", h.Name, h.Value, eol)
		} else {
			fmt.Fprintf(&b, "%s: %s%s", h.Name, h.Value, eol)
		}
	}
	b.WriteString(eol)
	return b.Bytes()
}

// describeRequest is every parsed property of req, for comparison.
func describeRequest(req *Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "method=%q target=%q path=%q query=%q authority=%q host=%q hasHost=%v minor=%d\n",
		req.Method, req.Target, req.Path, req.Query, req.Authority, req.Host, req.HasHost, req.Minor)
	fmt.Fprintf(&b, "framing=%d length=%d close=%v upgrade=%v expect=%v head=%v\n",
		req.Framing, req.ContentLength, req.Close, req.Upgrade, req.Expect100, req.IsHead)
	for _, h := range req.Headers {
		fmt.Fprintf(&b, "%q: %q hop=%v\n", h.Name, h.Value, h.Hop)
	}
	return b.String()
}

// FuzzRequestRoundTrip checks that a request the parser accepts, written
// back out (with CRLF, and with bare LF and extra spacing), parses to the
// same request: nothing the parser drops or normalises changes meaning
// when the proxy forwards it.
//
//	go test -run '^$' -fuzz FuzzRequestRoundTrip -fuzztime 60s ./internal/proxy/http1/
func FuzzRequestRoundTrip(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
		"POST /x?y HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTrailer: X\r\n\r\n",
		"GET http://a:1/b?c HTTP/1.0\r\nConnection: keep-alive, X, Upgrade\r\nX: 1\r\nUpgrade: h2c\r\n\r\n",
		"HEAD * HTTP/1.1\nHost:  h \nExpect: 100-continue\nTE: trailers\n\n",
		"GET https://[::1]:8443 HTTP/1.1\r\nhost: x\r\nProxy-Connection: close\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req Request
		if ParseRequest(data, &req) != nil {
			return
		}
		want := describeRequest(&req)
		for _, lf := range []bool{false, true} {
			out := serializeRequest(&req, lf)
			var again Request
			if err := ParseRequest(out, &again); err != nil {
				t.Fatalf("%q parsed, but its re-serialisation %q does not: %v", data, out, err)
			}
			if got := describeRequest(&again); got != want {
				t.Fatalf("%q re-serialised as %q parses differently:\n got %s\nwant %s", data, out, got, want)
			}
			// Read through a Reader one byte at a time, the head is the same.
			r := NewReader(&oneByteReader{s: string(out)})
			head, err := r.ReadHead(DefaultMaxHeadBytes)
			if err != nil || !bytes.Equal(head, out) {
				t.Fatalf("ReadHead of %q = %q, %v", out, head, err)
			}
		}
	})
}

// FuzzChunkedRoundTrip checks that a chunked body the decoder accepts,
// re-encoded with FrameChunk and AppendLastChunk in chunks of any size,
// decodes to the same payload and trailer, with our decoder and with
// net/http's.
func FuzzChunkedRoundTrip(f *testing.F) {
	f.Add([]byte("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"), uint8(3))
	f.Add([]byte("3;x=y\r\nabc\r\n0\r\nX-T: 1\r\nY: 2\r\n\r\n"), uint8(1))
	f.Add([]byte("0\r\n\r\n"), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, size uint8) {
		var c ChunkedReader
		c.Reset(NewReader(bytes.NewReader(data)))
		body, err := io.ReadAll(&c)
		if err != nil {
			return
		}
		if !c.Done() {
			t.Fatalf("%q: EOF before the last chunk", data)
		}
		trailer := bytes.Clone(c.Trailer)
		step := int(size) + 1
		var enc []byte
		buf := make([]byte, ChunkHeadroom+step+2)
		for rest := body; len(rest) > 0; {
			n := copy(buf[ChunkHeadroom:ChunkHeadroom+step], rest)
			enc = append(enc, FrameChunk(buf, n)...)
			rest = rest[n:]
		}
		enc = AppendLastChunk(enc, trailer)

		c.Reset(NewReader(bytes.NewReader(enc)))
		again, err := io.ReadAll(&c)
		if err != nil || !bytes.Equal(again, body) || !bytes.Equal(c.Trailer, trailer) {
			t.Fatalf("%q re-encoded as %q decodes to %q trailer %q, %v; want %q %q", data, enc, again, c.Trailer, err, body, trailer)
		}
		std, err := io.ReadAll(newChunkedStd(enc))
		if err != nil || !bytes.Equal(std, body) {
			t.Fatalf("net/http decodes %q to %q, %v; want %q", enc, std, err, body)
		}
	})
}
