package http1

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// The tests in this file pin down codec behaviour that mutation testing
// (make mutate PKG=./internal/proxy/http1) found untested: each case
// fails when the check it names is removed or inverted.

// TestRequestTargetBytes checks that a request-target with a control byte,
// TAB or DEL is rejected: a proxy that forwards one lets a backend that
// splits differently see another request (RFC 9112 §3.2).
func TestRequestTargetBytes(t *testing.T) {
	tests := []struct {
		name   string
		target string
		ok     bool
	}{
		{"plain", "/a/b", true},
		{"lowest printable", "/a!b", true},
		{"highest printable", "/a~b", true},
		{"obs-text", "/a\x80b", true},
		{"NUL", "/a\x00b", false},
		{"SOH", "/a\x01b", false},
		{"TAB", "/a\tb", false},
		{"bare CR", "/a\rb", false},
		{"unit separator", "/a\x1fb", false},
		{"DEL", "/a\x7fb", false},
		{"DEL at end", "/\x7f", false},
		{"control byte in absolute form", "http://h/\x01", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			head := []byte("GET " + tc.target + " HTTP/1.1\r\nHost: h\r\n\r\n")
			var req Request
			err := ParseRequest(head, &req)
			if tc.ok {
				if err != nil {
					t.Fatalf("target %q: %v", tc.target, err)
				}
				if string(req.Target) != tc.target {
					t.Fatalf("target %q, want %q", req.Target, tc.target)
				}
				return
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("target %q: err = %v, want ErrMalformed", tc.target, err)
			}
		})
	}
}

// TestHostBytes checks the Host check: whitespace, control bytes, DEL and
// '/' are rejected, in the header and in an absolute-form authority.
func TestHostBytes(t *testing.T) {
	tests := []struct {
		name, raw string
		host      string // "" means rejected
	}{
		{"plain", "GET / HTTP/1.1\r\nHost: a.b:80\r\n\r\n", "a.b:80"},
		{"bang", "GET / HTTP/1.1\r\nHost: a!\r\n\r\n", "a!"},
		{"inner space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", ""},
		{"inner TAB", "GET / HTTP/1.1\r\nHost: a\tb\r\n\r\n", ""},
		{"DEL", "GET / HTTP/1.1\r\nHost: a\x7f\r\n\r\n", ""},
		{"slash", "GET / HTTP/1.1\r\nHost: a/\r\n\r\n", ""},
		{"authority wins", "GET http://x.y/p HTTP/1.1\r\nHost: a b\r\n\r\n", "x.y"},
		{"authority without host header", "GET http://x.y/p HTTP/1.0\r\n\r\n", "x.y"},
		{"empty authority", "GET http:///p HTTP/1.1\r\nHost: h\r\n\r\n", ""},
		{"empty authority before query", "GET http://?q HTTP/1.1\r\nHost: h\r\n\r\n", ""},
		{"https", "GET https://s.t HTTP/1.1\r\nHost: h\r\n\r\n", "s.t"},
		{"HTTPS upper case", "GET HTTPS://s.t/ HTTP/1.1\r\nHost: h\r\n\r\n", "s.t"},
		{"scheme only", "GET http:// HTTP/1.1\r\nHost: h\r\n\r\n", ""},
		{"https scheme only", "GET https:// HTTP/1.1\r\nHost: h\r\n\r\n", ""},
		{"other scheme", "GET ftp://a/ HTTP/1.1\r\nHost: h\r\n\r\n", ""},
		{"other scheme, longer", "GET ftp://host/path HTTP/1.1\r\nHost: h\r\n\r\n", ""},
		{"no scheme, no slash", "GET host.example/path HTTP/1.1\r\nHost: h\r\n\r\n", ""},
		{"two asterisks", "OPTIONS ** HTTP/1.1\r\nHost: h\r\n\r\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var req Request
			err := ParseRequest([]byte(tc.raw), &req)
			if tc.host == "" {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err = %v, want ErrMalformed (host %q)", err, req.Host)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(req.Host) != tc.host {
				t.Fatalf("host %q, want %q", req.Host, tc.host)
			}
		})
	}
}

// TestAbsoluteFormSplit checks how an absolute-form target splits into
// authority, path and query.
func TestAbsoluteFormSplit(t *testing.T) {
	tests := []struct {
		target, authority, path, query string
	}{
		{"http://a", "a", "/", ""},
		{"https://a", "a", "/", ""},
		{"http://a?", "a", "/", "?"},
		{"http://a/", "a", "/", ""},
		{"http://a/b?c?d", "a", "/b", "?c?d"},
		{"/b?", "", "/b", "?"},
		{"/", "", "/", ""},
	}
	for _, tc := range tests {
		var req Request
		if err := ParseRequest([]byte("GET "+tc.target+" HTTP/1.1\r\nHost: h\r\n\r\n"), &req); err != nil {
			t.Errorf("%s: %v", tc.target, err)
			continue
		}
		if string(req.Authority) != tc.authority || string(req.Path) != tc.path || string(req.Query) != tc.query {
			t.Errorf("%s: authority %q path %q query %q, want %q %q %q", tc.target, req.Authority, req.Path, req.Query, tc.authority, tc.path, tc.query)
		}
	}
}

// TestHopByHopFields checks that every field RFC 9110 §7.6.1 lists, and
// every field Connection names, is marked hop-by-hop so the proxy strips
// it: forwarding Upgrade or Trailer would let a client smuggle an h2c
// upgrade or trailers past the proxy.
func TestHopByHopFields(t *testing.T) {
	hop := []string{
		"Connection", "Proxy-Connection", "Keep-Alive", "TE", "te", "Upgrade", "UPGRADE",
		"Trailer", "trailer", "Transfer-Encoding", "Proxy-Authenticate", "Proxy-Authorization",
	}
	end := []string{
		"X-Up", "Upgrades", "Trailers", "Tf", "Hosts", "Content-Type", "Authorization",
		"Proxy-Authorizatio", "Keep-Alivee", "Connectiom", "X-Keep-Alive", "Proxy-Authenticat",
		"Expects", "Content-Lengths", "Proxy-Connectio", "Transfer-Encodin", "Accept-Encoding",
	}
	classified := map[string]fieldKind{
		"Te": fieldHop, "Host": fieldHost, "hOST": fieldHost, "Expect": fieldExpect,
		"Upgrade": fieldHop, "Trailer": fieldHop, "Connection": fieldConnection, "Keep-Alive": fieldHop,
		"Content-Length": fieldContentLength, "Proxy-Connection": fieldConnection,
		"Transfer-Encoding": fieldTransferEncoding, "Proxy-Authenticate": fieldHop,
		"Proxy-Authorization": fieldHop, "Accept": fieldOther, "X": fieldOther,
	}
	for name, want := range classified {
		if got := classify([]byte(name)); got != want {
			t.Errorf("classify(%q) = %d, want %d", name, got, want)
		}
	}
	var raw strings.Builder
	raw.WriteString("GET / HTTP/1.1\r\nHost: h\r\n")
	for _, n := range append(append([]string(nil), hop...), end...) {
		if strings.EqualFold(n, "Transfer-Encoding") {
			raw.WriteString(n + ": chunked\r\n")
			continue
		}
		raw.WriteString(n + ": v\r\n")
	}
	raw.WriteString("\r\n")
	var req Request
	if err := ParseRequest([]byte(raw.String()), &req); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, n := range hop {
		want[n] = true
	}
	for _, h := range req.Headers {
		if h.Hop != want[string(h.Name)] {
			t.Errorf("%s: hop-by-hop %v, want %v", h.Name, h.Hop, want[string(h.Name)])
		}
	}
	if len(req.Headers) != 1+len(hop)+len(end) {
		t.Fatalf("%d headers", len(req.Headers))
	}
}

// TestConnectionOptions checks the Connection tokens: close, keep-alive
// and upgrade set their flags wherever they appear in the list, and the
// fields the list names (with any spacing) become hop-by-hop.
func TestConnectionOptions(t *testing.T) {
	tests := []struct {
		name, raw      string
		close, upgrade bool
		hop            string
	}{
		{name: "upgrade", raw: "GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n", upgrade: true, hop: "Connection,Upgrade"},
		{name: "list", raw: "GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive , UPGRADE,close\r\n\r\n", close: true, upgrade: true, hop: "Connection"},
		{name: "http/1.0 keep-alive later in list", raw: "GET / HTTP/1.0\r\nConnection: x-a, Keep-Alive\r\nX-A: 1\r\nX-B: 2\r\n\r\n", hop: "Connection,X-A"},
		{name: "proxy-connection names a field", raw: "GET / HTTP/1.1\r\nHost: h\r\nX-Secret: 1\r\nProxy-Connection: x-secret\r\n\r\n", hop: "X-Secret,Proxy-Connection"},
		{name: "two connection fields", raw: "GET / HTTP/1.1\r\nHost: h\r\nConnection: x-a\r\nConnection: x-b\r\nX-A: 1\r\nX-B: 2\r\nX-C: 3\r\n\r\n", hop: "Connection,Connection,X-A,X-B"},
		{name: "leading comma", raw: "GET / HTTP/1.1\r\nHost: h\r\nConnection: , close,X-A\r\nX-A: 1\r\n\r\n", close: true, hop: "Connection,X-A"},
		{name: "empty tokens", raw: "GET / HTTP/1.1\r\nHost: h\r\nConnection: ,,\r\n\r\n", hop: "Connection"},
		{name: "no connection", raw: "GET / HTTP/1.1\r\nHost: h\r\nX-A: close\r\n\r\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var req Request
			if err := ParseRequest([]byte(tc.raw), &req); err != nil {
				t.Fatal(err)
			}
			var hop []string
			for _, h := range req.Headers {
				if h.Hop {
					hop = append(hop, string(h.Name))
				}
			}
			if req.Close != tc.close || req.Upgrade != tc.upgrade || strings.Join(hop, ",") != tc.hop {
				t.Errorf("close %v upgrade %v hop %q, want %v %v %q", req.Close, req.Upgrade, hop, tc.close, tc.upgrade, tc.hop)
			}
		})
	}
}

// TestHeadRequest checks IsHead, Expect and the reuse of a Request.
func TestHeadRequest(t *testing.T) {
	var req Request
	if err := ParseRequest([]byte("HEAD / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nX: 1\r\n\r\n"), &req); err != nil {
		t.Fatal(err)
	}
	if !req.IsHead || !req.Expect100 || !req.HasHost || len(req.Headers) != 3 {
		t.Fatalf("head %v expect %v host %v headers %d", req.IsHead, req.Expect100, req.HasHost, len(req.Headers))
	}
	// Parsing again into the same Request resets it.
	if err := ParseRequest([]byte("GET / HTTP/1.0\r\nExpect: something\r\n\r\n"), &req); err != nil {
		t.Fatal(err)
	}
	if req.IsHead || req.Expect100 || req.HasHost || len(req.Headers) != 1 || req.Host != nil {
		t.Fatalf("not reset: head %v expect %v host %v %q headers %d", req.IsHead, req.Expect100, req.HasHost, req.Host, len(req.Headers))
	}
	if err := ParseRequest([]byte("head / HTTP/1.1\r\nHost: h\r\n\r\n"), &req); err != nil || req.IsHead {
		t.Fatalf("lower-case head: IsHead %v err %v (methods are case-sensitive)", req.IsHead, err)
	}
}

// TestRequestLine checks the request-line parts one by one.
func TestRequestLine(t *testing.T) {
	tests := []struct {
		line string
		ok   bool
	}{
		{"GET / HTTP/1.1", true},
		{"G / HTTP/1.1", true},
		{" / HTTP/1.1", false},
		{"GET", false},
		{"GET /", false},
		{"GET / ", false},
		{"GET / HTTP/1.1 ", false},
		{"GET / HTTP/1.10", false},
		{"GET / http/1.1", false},
		{"GET / HTTP/1.", false},
		{"GET / HTTP/1.a", false},
		{"GET / HTTP/0.9", false},
		{"GET a HTTP/1.1", false},
		{"GET  HTTP/1.1", false}, // empty target
		{"M{ / HTTP/1.1", false},
	}
	for _, tc := range tests {
		var req Request
		err := ParseRequest([]byte(tc.line+"\r\nHost: h\r\n\r\n"), &req)
		if (err == nil) != tc.ok {
			t.Errorf("%q: err = %v, want ok %v", tc.line, err, tc.ok)
		}
	}
}

// TestFieldSyntax checks field-line rules: the name is a token, the value
// has no control bytes but TAB, nothing follows the empty line.
func TestFieldSyntax(t *testing.T) {
	tests := []struct {
		name, fields string
		value        string // value of X when accepted
		err          error
	}{
		{name: "tab in value", fields: "X: a\tb\r\n", value: "a\tb"},
		{name: "obs-text in value", fields: "X: a\x80\xffb\r\n", value: "a\x80\xffb"},
		{name: "empty value", fields: "X:\r\n", value: ""},
		{name: "tab around value", fields: "X:\t a \t\r\n", value: "a"},
		{name: "colon in value", fields: "X: a:b\r\n", value: "a:b"},
		{name: "all tchars", fields: "!#$%&'*+-.^_`|~09azAZ: v\r\nX: 1\r\n", value: "1"},
		{name: "DEL in value", fields: "X: a\x7f\r\n", err: ErrMalformed},
		{name: "unit separator in value", fields: "X: a\x1f\r\n", err: ErrMalformed},
		{name: "empty name", fields: ": v\r\n", err: ErrMalformed},
		{name: "tab fold", fields: "X: a\r\n\tb\r\n", err: ErrMalformed},
		{name: "space in name", fields: "X Y: v\r\n", err: ErrMalformed},
		{name: "slash in name", fields: "X/Y: v\r\n", err: ErrMalformed},
		{name: "DEL in name", fields: "X\x7f: v\r\n", err: ErrMalformed},
		{name: "bytes after the head", fields: "X: 1\r\n\r\nY: 2\r\n", err: ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var req Request
			err := ParseRequest([]byte("GET / HTTP/1.1\r\nHost: h\r\n"+tc.fields+"\r\n"), &req)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := req.Headers.Get("x"); !ok || string(v) != tc.value {
				t.Fatalf("X = %q %v, want %q", v, ok, tc.value)
			}
		})
	}
}

// TestMaxHeaders checks the field-count limit at its edge: MaxHeaders
// fields are accepted, one more is not.
func TestMaxHeaders(t *testing.T) {
	fields := func(n int) []byte {
		return []byte("GET / HTTP/1.1\r\n" + strings.Repeat("Host: h\r\n", 1) + strings.Repeat("X: a\r\n", n-1) + "\r\n")
	}
	var req Request
	if err := ParseRequest(fields(MaxHeaders), &req); err != nil || len(req.Headers) != MaxHeaders {
		t.Fatalf("%d fields: %v (%d parsed)", MaxHeaders, err, len(req.Headers))
	}
	if err := ParseRequest(fields(MaxHeaders+1), &req); !errors.Is(err, ErrTooManyHeaders) {
		t.Fatalf("%d fields: err = %v, want ErrTooManyHeaders", MaxHeaders+1, err)
	}
}

// TestContentLengthValues checks Content-Length parsing at its limits.
func TestContentLengthValues(t *testing.T) {
	tests := []struct {
		value string
		n     int64
		ok    bool
	}{
		{"0", 0, true},
		{"7", 7, true},
		{"09", 9, true},
		{"123456789012345678", 123456789012345678, true},
		{"1234567890123456789", 0, false}, // 19 digits could overflow
		{"", 0, false},
		{"1a", 0, false},
		{"/", 0, false},
		{":", 0, false},
		{"+1", 0, false},
	}
	for _, tc := range tests {
		n, ok := parseContentLength([]byte(tc.value))
		if ok != tc.ok || n != tc.n {
			t.Errorf("parseContentLength(%q) = %d %v, want %d %v", tc.value, n, ok, tc.n, tc.ok)
		}
	}
	// Through the parser: a request's length framing, and a response
	// with the same Content-Length twice.
	var req Request
	if err := ParseRequest([]byte("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\n"), &req); err != nil ||
		req.Framing != FramingLength || req.ContentLength != 1 {
		t.Fatalf("length 1: framing %d length %d err %v", req.Framing, req.ContentLength, err)
	}
	var resp Response
	if err := ParseResponse([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), &resp, false); err != nil ||
		resp.Framing != FramingLength || resp.ContentLength != 0 {
		t.Fatalf("response length 0: framing %d length %d err %v", resp.Framing, resp.ContentLength, err)
	}
	if err := ParseRequest([]byte("GET / HTTP/1.1\r\nHost: h\r\n\r\n"), &req); err != nil || req.ContentLength != -1 {
		t.Fatalf("no length: %d %v", req.ContentLength, err)
	}
}

// TestParseResponseEdges checks status-line parsing at every boundary and
// the framing rules of responses.
func TestParseResponseEdges(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		head    bool
		status  int
		reason  string
		framing Framing
		length  int64
		close   bool
		upgrade bool
		err     bool
	}{
		{name: "shortest", raw: "HTTP/1.1 200\r\n\r\n", status: 200, framing: FramingClose, length: -1},
		{name: "empty reason", raw: "HTTP/1.1 200 \r\nContent-Length: 2\r\n\r\n", status: 200, framing: FramingLength, length: 2},
		{name: "reason with space and tab", raw: "HTTP/1.1 404 Not Found\t!\r\nContent-Length: 0\r\n\r\n", status: 404, reason: "Not Found\t!", framing: FramingLength},
		{name: "obs-text reason", raw: "HTTP/1.1 200 \xe9t\xe9\r\nContent-Length: 0\r\n\r\n", status: 200, reason: "\xe9t\xe9", framing: FramingLength},
		{name: "100", raw: "HTTP/1.1 100 Continue\r\nContent-Length: 5\r\n\r\n", status: 100, reason: "Continue", framing: FramingNone, length: 5},
		{name: "199", raw: "HTTP/1.1 199 X\r\nContent-Length: 5\r\n\r\n", status: 199, reason: "X", framing: FramingNone, length: 5},
		{name: "101 upgrade", raw: "HTTP/1.1 101 Switching\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n", status: 101, reason: "Switching", framing: FramingNone, length: -1, upgrade: true},
		{name: "200 chunked", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", status: 200, reason: "OK", framing: FramingChunked, length: -1},
		{name: "203", raw: "HTTP/1.1 203 X\r\nContent-Length: 5\r\n\r\n", status: 203, reason: "X", framing: FramingLength, length: 5},
		{name: "205", raw: "HTTP/1.1 205 X\r\nContent-Length: 0\r\n\r\n", status: 205, reason: "X", framing: FramingLength},
		{name: "303", raw: "HTTP/1.1 303 X\r\nContent-Length: 5\r\n\r\n", status: 303, reason: "X", framing: FramingLength, length: 5},
		{name: "305", raw: "HTTP/1.1 305 X\r\nContent-Length: 5\r\n\r\n", status: 305, reason: "X", framing: FramingLength, length: 5},
		{name: "599 chunked HEAD", raw: "HTTP/1.1 599 X\r\nTransfer-Encoding: chunked\r\n\r\n", head: true, status: 599, reason: "X", framing: FramingNone, length: -1},
		{name: "http/1.0 keep-alive", raw: "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\n", status: 200, reason: "OK", framing: FramingLength, length: 1},
		{name: "http/1.0 chunked", raw: "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", status: 200, reason: "OK", framing: FramingChunked, length: -1, close: true},

		{name: "too short", raw: "HTTP/1.1 20\r\n\r\n", err: true},
		{name: "no space", raw: "HTTP/1.1_200 OK\r\n\r\n", err: true},
		{name: "HTTP/1.2", raw: "HTTP/1.2 200 OK\r\n\r\n", err: true},
		{name: "000", raw: "HTTP/1.1 000 X\r\n\r\n", err: true},
		{name: "0xx", raw: "HTTP/1.1 099 X\r\n\r\n", err: true},
		{name: "6xx", raw: "HTTP/1.1 600 X\r\n\r\n", err: true},
		{name: "letter first", raw: "HTTP/1.1 a00 X\r\n\r\n", err: true},
		{name: "colon first", raw: "HTTP/1.1 :00 X\r\n\r\n", err: true},
		{name: "letter second", raw: "HTTP/1.1 2a0 X\r\n\r\n", err: true},
		{name: "slash second", raw: "HTTP/1.1 2/0 X\r\n\r\n", err: true},
		{name: "colon second", raw: "HTTP/1.1 2:0 X\r\n\r\n", err: true},
		{name: "letter third", raw: "HTTP/1.1 20a X\r\n\r\n", err: true},
		{name: "slash third", raw: "HTTP/1.1 20/ X\r\n\r\n", err: true},
		{name: "colon third", raw: "HTTP/1.1 20: X\r\n\r\n", err: true},
		{name: "reason control byte", raw: "HTTP/1.1 200 O\x01K\r\n\r\n", err: true},
		{name: "reason unit separator", raw: "HTTP/1.1 200 O\x1fK\r\n\r\n", err: true},
		{name: "reason DEL", raw: "HTTP/1.1 200 O\x7fK\r\n\r\n", err: true},
		{name: "bad field", raw: "HTTP/1.1 200 OK\r\nX Y: 1\r\n\r\n", err: true},
		{name: "bad TE", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var resp Response
			err := ParseResponse([]byte(tc.raw), &resp, tc.head)
			if tc.err {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err = %v, want ErrMalformed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != tc.status || string(resp.Reason) != tc.reason || resp.Framing != tc.framing ||
				resp.ContentLength != tc.length || resp.Close != tc.close || resp.Upgrade != tc.upgrade {
				t.Errorf("status %d reason %q framing %d length %d close %v upgrade %v",
					resp.Status, resp.Reason, resp.Framing, resp.ContentLength, resp.Close, resp.Upgrade)
			}
		})
	}
}

func TestNoBody(t *testing.T) {
	for status, want := range map[int]bool{100: true, 101: true, 199: true, 200: false, 201: false, 203: false,
		204: true, 205: false, 303: false, 304: true, 305: false, 404: false, 500: false} {
		if got := NoBody(status); got != want {
			t.Errorf("NoBody(%d) = %v, want %v", status, got, want)
		}
	}
}

// TestLengthReader checks a Content-Length body: exactly Left bytes are
// returned, the rest stays buffered for the next message, and a peer that
// closes before the end is an error (a truncated body must not be
// forwarded as a complete one).
func TestLengthReader(t *testing.T) {
	tests := []struct {
		name  string
		input string
		left  int64
		body  string
		rest  string
		err   error
	}{
		{name: "exact", input: "hello", left: 5, body: "hello"},
		{name: "more follows", input: "helloGET", left: 5, body: "hello", rest: "GET"},
		{name: "zero", input: "abc", left: 0, body: "", rest: "abc"},
		{name: "cut short", input: "hel", left: 5, body: "hel", err: io.ErrUnexpectedEOF},
		{name: "one byte short", input: "hell", left: 5, body: "hell", err: io.ErrUnexpectedEOF},
		{name: "nothing", input: "", left: 1, body: "", err: io.ErrUnexpectedEOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, src := range []struct {
				name string
				r    io.Reader
			}{
				{"one read", strings.NewReader(tc.input)},
				{"byte by byte", &oneByteReader{s: tc.input}},
				{"data with EOF", &dataEOFReader{s: tc.input}},
			} {
				r := NewReader(src.r)
				// Buffer the first byte, as a head read would.
				if len(tc.input) > 0 {
					if err := r.fill(DefaultBufferSize); err != nil {
						t.Fatal(err)
					}
				}
				lr := &LengthReader{R: r, Left: tc.left}
				got, err := io.ReadAll(lr)
				if string(got) != tc.body || !errors.Is(err, tc.err) && !(tc.err == nil && err == nil) {
					t.Errorf("%s: body %q err %v, want %q %v", src.name, got, err, tc.body, tc.err)
				}
				if tc.err == nil {
					if lr.Left != 0 {
						t.Errorf("%s: Left %d after the body", src.name, lr.Left)
					}
					rest, _ := io.ReadAll(r)
					if string(rest) != tc.rest {
						t.Errorf("%s: left over %q, want %q", src.name, rest, tc.rest)
					}
				}
			}
		})
	}
}

// dataEOFReader returns its data together with io.EOF, as some readers do.
type dataEOFReader struct{ s string }

func (d *dataEOFReader) Read(p []byte) (int, error) {
	n := copy(p, d.s)
	d.s = d.s[n:]
	if len(d.s) == 0 {
		return n, io.EOF
	}
	return n, nil
}

// TestLengthReaderDataWithEOF checks that the last bytes of a body that
// arrive together with io.EOF complete it without an error.
func TestLengthReaderDataWithEOF(t *testing.T) {
	r := NewReader(&dataEOFReader{s: "abc"})
	lr := &LengthReader{R: r, Left: 3}
	p := make([]byte, 10)
	n, err := lr.Read(p)
	if n != 3 || err != nil || lr.Left != 0 {
		t.Fatalf("read %d %v, Left %d; want 3 <nil> 0", n, err, lr.Left)
	}
	if n, err := lr.Read(p); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("after the body: %d %v", n, err)
	}
	r = NewReader(&dataEOFReader{s: "ab"})
	lr = &LengthReader{R: r, Left: 3}
	if n, err := lr.Read(p); n != 2 || !errors.Is(err, io.ErrUnexpectedEOF) || lr.Left != 1 {
		t.Fatalf("short: read %d %v, Left %d; want 2 ErrUnexpectedEOF 1", n, err, lr.Left)
	}
}

// TestChunkedEdges covers chunk-size syntax, trailers with several fields,
// and the trailer size limit.
func TestChunkedEdges(t *testing.T) {
	tests := []struct {
		name, raw, body, trailer string
		err                      error
	}{
		{name: "lower-case hex", raw: "a\r\n0123456789\r\n0\r\n\r\n", body: "0123456789"},
		{name: "upper-case hex", raw: "F\r\n0123456789abcde\r\n0\r\n\r\n", body: "0123456789abcde"},
		{name: "digits 9 and f", raw: "9f\r\n" + strings.Repeat("x", 0x9f) + "\r\n0\r\n\r\n", body: strings.Repeat("x", 0x9f)},
		{name: "mixed hex", raw: "1aB\r\n" + strings.Repeat("x", 0x1ab) + "\r\n0\r\n\r\n", body: strings.Repeat("x", 0x1ab)},
		{name: "leading zeros", raw: "000000000000003\r\nabc\r\n0\r\n\r\n", body: "abc"},
		{name: "fifteen digits", raw: "000000000000000\r\n\r\n", body: ""},
		{name: "sixteen digits", raw: "0000000000000003\r\nabc\r\n0\r\n\r\n", err: ErrMalformed},
		{name: "BWS before ext", raw: "3 \t;a=b\r\nabc\r\n0\r\n\r\n", body: "abc"},
		{name: "ext with spaces", raw: "3 ; a = b\r\nabc\r\n0\r\n\r\n", body: "abc"},
		{name: "ext with tab", raw: "3;a=\tb\r\nabc\r\n0\r\n\r\n", body: "abc"},
		{name: "ext with control byte", raw: "3;a=\x01\r\nabc\r\n0\r\n\r\n", err: ErrMalformed},
		{name: "ext with unit separator", raw: "3;a=\x1f\r\nabc\r\n0\r\n\r\n", err: ErrMalformed},
		{name: "ext with DEL", raw: "3;\x7f\r\nabc\r\n0\r\n\r\n", err: ErrMalformed},
		{name: "junk after size", raw: "3x\r\nabc\r\n0\r\n\r\n", err: ErrMalformed},
		{name: "junk after BWS", raw: "3 x\r\nabc\r\n0\r\n\r\n", err: ErrMalformed},
		{name: "no digits", raw: ";x\r\n", err: ErrMalformed},
		{name: "g is not hex", raw: "g\r\n", err: ErrMalformed},
		{name: "G is not hex", raw: "G\r\n", err: ErrMalformed},
		{name: "backquote is not hex", raw: "`\r\n", err: ErrMalformed},
		{name: "at is not hex", raw: "@\r\n", err: ErrMalformed},
		{name: "slash is not hex", raw: "/\r\n", err: ErrMalformed},
		{name: "colon is not hex", raw: ":\r\n", err: ErrMalformed},
		{name: "data without CRLF", raw: "3\r\nabcd\r\n0\r\n\r\n", err: ErrMalformed},
		{name: "body cut in the size line", raw: "3", err: io.ErrUnexpectedEOF},
		{name: "body cut after the data", raw: "3\r\nabc", err: io.ErrUnexpectedEOF},
		{name: "body cut in the trailer", raw: "0\r\nX: 1\r\n", err: io.ErrUnexpectedEOF},
		{name: "three trailer fields", raw: "1\r\na\r\n0\r\nX-A: 1\r\nx-b:2\nX-C: \t3\r\n\r\nNEXT", body: "a", trailer: "X-A: 1\r\nx-b:2\r\nX-C: \t3\r\n"},
		{name: "trailer with empty value", raw: "0\r\nX:\r\n\r\n", trailer: "X:\r\n"},
		{name: "trailer with obs-text", raw: "0\r\nX: \x80\r\n\r\n", trailer: "X: \x80\r\n"},
		{name: "trailer value control byte", raw: "0\r\nX: a\x01\r\n\r\n", err: ErrMalformed},
		{name: "trailer value unit separator", raw: "0\r\nX: a\x1f\r\n\r\n", err: ErrMalformed},
		{name: "trailer value DEL", raw: "0\r\nX: a\x7f\r\n\r\n", err: ErrMalformed},
		{name: "trailer empty name", raw: "0\r\n: a\r\n\r\n", err: ErrMalformed},
		{name: "trailer without colon", raw: "0\r\nX\r\n\r\n", err: ErrMalformed},
		{name: "trailer colon in value", raw: "0\r\nX: a:b\r\n\r\n", trailer: "X: a:b\r\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tc.raw))
			var c ChunkedReader
			c.Reset(r)
			got, err := io.ReadAll(&c)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				if c.Done() {
					t.Fatal("Done after an error")
				}
				return
			}
			if err != nil || string(got) != tc.body || string(c.Trailer) != tc.trailer {
				t.Fatalf("body %q trailer %q err %v, want %q %q", got, c.Trailer, err, tc.body, tc.trailer)
			}
			if !c.Done() {
				t.Fatal("not Done after the last chunk")
			}
			if strings.HasSuffix(tc.raw, "NEXT") && string(r.Buffered()) != "NEXT" {
				t.Errorf("left %q", r.Buffered())
			}
		})
	}
}

// TestChunkedTrailerLimit checks MaxTrailerBytes at its edge.
func TestChunkedTrailerLimit(t *testing.T) {
	field := func(n int) string { // a trailer field that takes n bytes with its CRLF
		return "X: " + strings.Repeat("v", n-5) + "\r\n"
	}
	for _, tc := range []struct {
		fields []string
		err    error
	}{
		{fields: []string{field(MaxTrailerBytes / 2), field(MaxTrailerBytes / 2)}},
		{fields: []string{field(MaxTrailerBytes/2 + 1), field(MaxTrailerBytes / 2)}, err: ErrHeaderTooLarge},
	} {
		raw := "0\r\n" + strings.Join(tc.fields, "") + "\r\n"
		r := NewReader(strings.NewReader(raw))
		var c ChunkedReader
		c.Reset(r)
		_, err := io.ReadAll(&c)
		if !errors.Is(err, tc.err) && !(err == nil && tc.err == nil) {
			t.Errorf("trailer of %d bytes: err = %v, want %v", len(strings.Join(tc.fields, "")), err, tc.err)
		}
		if tc.err == nil && len(c.Trailer) != MaxTrailerBytes {
			t.Errorf("trailer %d bytes, want %d", len(c.Trailer), MaxTrailerBytes)
		}
	}
}

// TestChunkedReadPieces reads a chunked body through small buffers, a
// zero-length buffer and a connection that delivers one byte at a time.
func TestChunkedReadPieces(t *testing.T) {
	raw := "5\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n"
	r := NewReader(&oneByteReader{s: raw})
	var c ChunkedReader
	c.Reset(r)
	if n, err := c.Read(nil); n != 0 || err != nil {
		t.Fatalf("Read(nil) = %d %v", n, err)
	}
	var got []byte
	p := make([]byte, 2)
	for {
		n, err := c.Read(p)
		got = append(got, p[:n]...)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if string(got) != "hello world" || string(c.Trailer) != "X-T: 1\r\n" {
		t.Fatalf("body %q trailer %q", got, c.Trailer)
	}
	// A reused reader starts clean.
	c.Reset(NewReader(strings.NewReader("0\r\n\r\n")))
	if c.Done() || len(c.Trailer) != 0 {
		t.Fatalf("Reset: done %v trailer %q", c.Done(), c.Trailer)
	}
	if b, err := io.ReadAll(&c); err != nil || len(b) != 0 || len(c.Trailer) != 0 {
		t.Fatalf("empty body %q trailer %q err %v", b, c.Trailer, err)
	}
}

// TestAppendHelpers checks the writers against the parsers.
func TestAppendHelpers(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 1: "1", 9: "9", 10: "10", 1234567890: "1234567890", 1<<62 + 5: "4611686018427387909"} {
		if got := string(AppendInt([]byte("x"), n)); got != "x"+want {
			t.Errorf("AppendInt(%d) = %q, want %q", n, got, "x"+want)
		}
	}
	if got := string(AppendHeader([]byte("A"), []byte("Name"), []byte("v 1"))); got != "AName: v 1\r\n" {
		t.Errorf("AppendHeader = %q", got)
	}
	if got := string(AppendLastChunk([]byte("D"), []byte("T: 1\r\n"))); got != "D0\r\nT: 1\r\n\r\n" {
		t.Errorf("AppendLastChunk = %q", got)
	}
	buf := make([]byte, ChunkHeadroom+0x1234+2)
	for _, n := range []int{1, 9, 10, 15, 16, 17, 0xff, 0x100, 0x1234} {
		copy(buf[ChunkHeadroom:], strings.Repeat("q", n))
		chunk := FrameChunk(buf, n)
		want := hex(n) + "\r\n" + strings.Repeat("q", n) + "\r\n"
		if string(chunk) != want {
			t.Errorf("FrameChunk(%d) = %.30q..., want %.30q...", n, chunk, want)
		}
	}
}

func hex(n int) string {
	const digits = "0123456789abcdef"
	var b []byte
	for ; n > 0; n >>= 4 {
		b = append([]byte{digits[n&0xf]}, b...)
	}
	return string(b)
}

// TestLookup checks Get and Lookup: case-insensitive names, joined
// repeated values, and a missing name.
func TestLookup(t *testing.T) {
	var req Request
	if err := ParseRequest([]byte("GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nx-b: \r\nX-A: 2\r\nx-a: 3\r\nX-C: c\r\n\r\n"), &req); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, want string
		ok         bool
	}{
		{"x-a", "1,2,3", true},
		{"X-B", "", true},
		{"x-c", "c", true},
		{"host", "h", true},
		{"x-d", "", false},
	}
	for _, tc := range tests {
		got, ok := req.Headers.Lookup(tc.name)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Lookup(%q) = %q %v, want %q %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if v, ok := req.Headers.Get("X-A"); !ok || string(v) != "1" {
		t.Errorf("Get(X-A) = %q %v, want the first value", v, ok)
	}
	if _, ok := req.Headers.Get("X-Z"); ok {
		t.Error("Get(X-Z) found something")
	}
	if UnsafeString(nil) != "" || UnsafeString([]byte("ab")) != "ab" {
		t.Error("UnsafeString")
	}
}

// TestEqualFold checks ASCII case folding: letters fold, other bytes that
// differ only in bit 0x20 do not.
func TestEqualFold(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"Content-Length", "content-length", true},
		{"ABCXYZ", "abcxyz", true},
		{"abc", "abd", false},
		{"abc", "ab", false},
		{"[", "{", false}, // 0x5b / 0x7b
		{"@", "`", false}, // 0x40 / 0x60, just below 'a'
		{"^", "~", false}, // 0x5e / 0x7e, just above 'z'
		{"\x00", " ", false},
		{"1", "\x11", false},
		{"", "", true},
	}
	for _, tc := range tests {
		if got := EqualFold([]byte(tc.a), tc.b); got != tc.want {
			t.Errorf("EqualFold(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := EqualFold([]byte(tc.b), tc.a); got != tc.want {
			t.Errorf("EqualFold(%q, %q) = %v, want %v", tc.b, tc.a, got, tc.want)
		}
	}
}

// TestTrimOWS checks that only spaces and tabs are trimmed, at both ends.
func TestTrimOWS(t *testing.T) {
	for in, want := range map[string]string{"": "", " ": "", "\t a \t": "a", "a b": "a b", " \x0ba\x0b ": "\x0ba\x0b"} {
		if got := string(trimOWS([]byte(in))); got != want {
			t.Errorf("trimOWS(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestReaderGrowAndCompact drives the Reader's buffer management: a head
// larger than the default buffer grows it, pipelined heads after a large
// body compact it, and heads past the limit fail.
func TestReaderGrowAndCompact(t *testing.T) {
	big := "GET /big HTTP/1.1\r\nHost: h\r\nX: " + strings.Repeat("a", DefaultBufferSize+100) + "\r\n\r\n"
	small := "GET /small HTTP/1.1\r\nHost: h\r\n\r\n"
	r := NewReader(strings.NewReader(big + small))
	defer r.Release()
	head, err := r.ReadHead(DefaultMaxHeadBytes)
	if err != nil || len(head) != len(big) {
		t.Fatalf("big head: %d bytes, err %v", len(head), err)
	}
	if !r.big || len(r.buf) != 2*DefaultBufferSize {
		t.Fatalf("buffer: big %v size %d, want grown to %d", r.big, len(r.buf), 2*DefaultBufferSize)
	}
	head, err = r.ReadHead(DefaultMaxHeadBytes)
	if err != nil || string(head) != small {
		t.Fatalf("small head %q err %v", head, err)
	}

	// The limit caps growth: a buffer never grows past max.
	r2 := NewReader(strings.NewReader("GET / HTTP/1.1\r\nX: " + strings.Repeat("a", DefaultBufferSize+10) + "\r\n\r\n"))
	if _, err := r2.ReadHead(DefaultBufferSize + 5); !errors.Is(err, ErrHeaderTooLarge) {
		t.Fatalf("err = %v, want ErrHeaderTooLarge", err)
	}
	if len(r2.buf) > DefaultBufferSize+5 {
		t.Fatalf("buffer grew to %d past the limit", len(r2.buf))
	}
	r2.Release()

	// Many pipelined requests, read a full buffer at a time: a head cut
	// at the end of the buffer is moved to the front instead of growing
	// the buffer.
	var stream strings.Builder
	for i := 0; stream.Len() < 3*DefaultBufferSize; i++ {
		stream.WriteString("GET /" + strings.Repeat("p", i%50) + " HTTP/1.1\r\nHost: h\r\n\r\n")
	}
	r3 := NewReader(strings.NewReader(stream.String()))
	defer r3.Release()
	n := 0
	for {
		head, err := r3.ReadHead(DefaultMaxHeadBytes)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("request %d: %v", n, err)
		}
		var req Request
		if err := ParseRequest(head, &req); err != nil || len(req.Path) != 1+n%50 {
			t.Fatalf("request %d: path %q err %v", n, req.Path, err)
		}
		n++
	}
	if r3.big {
		t.Fatal("pipelined small heads grew the buffer")
	}
}

// TestReadHeadSplit feeds heads whose terminator straddles reads, and
// leading empty lines, in every split.
func TestReadHeadSplit(t *testing.T) {
	for _, raw := range []string{
		"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET / HTTP/1.1\nHost: h\n\n",
		"\r\n\nGET / HTTP/1.1\r\nHost: h\r\n\r\n",
	} {
		for split := 0; split <= len(raw); split++ {
			r := NewReader(&splitReader{parts: []string{raw[:split], raw[split:]}})
			head, err := r.ReadHead(DefaultMaxHeadBytes)
			if err != nil {
				t.Fatalf("%q split at %d: %v", raw, split, err)
			}
			var req Request
			if err := ParseRequest(head, &req); err != nil || string(req.Host) != "h" {
				t.Fatalf("%q split at %d: head %q err %v", raw, split, head, err)
			}
			if !bytes.HasPrefix(head, []byte("GET")) {
				t.Fatalf("%q split at %d: head %q does not start at the request line", raw, split, head)
			}
		}
	}
	// A lone CR before the request line is not skipped.
	r := NewReader(strings.NewReader("\rGET / HTTP/1.1\r\nHost: h\r\n\r\n"))
	head, err := r.ReadHead(DefaultMaxHeadBytes)
	var req Request
	if err != nil || ParseRequest(head, &req) == nil {
		t.Fatalf("lone CR: head %q accepted (err %v)", head, err)
	}
}

// splitReader returns its parts one per Read.
type splitReader struct{ parts []string }

func (s *splitReader) Read(p []byte) (int, error) {
	for len(s.parts) > 0 && s.parts[0] == "" {
		s.parts = s.parts[1:]
	}
	if len(s.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.parts[0])
	s.parts[0] = s.parts[0][n:]
	return n, nil
}

// TestReadLineLimit checks the chunk-line limit: a line that fits is read
// through several fills; one past maxChunkLine is refused.
func TestReadLineLimit(t *testing.T) {
	r := NewReader(strings.NewReader(strings.Repeat("a", maxChunkLine-1) + "\n"))
	if line, err := r.readLine(maxChunkLine); err != nil || len(line) != maxChunkLine-1 {
		t.Fatalf("line of %d bytes: read %d, err %v", maxChunkLine-1, len(line), err)
	}
	r = NewReader(strings.NewReader(strings.Repeat("a", maxChunkLine)))
	if _, err := r.readLine(maxChunkLine); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("err = %v, want ErrLineTooLong", err)
	}
	r = NewReader(strings.NewReader("abc"))
	if _, err := r.readLine(maxChunkLine); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("unterminated line: err = %v, want ErrUnexpectedEOF", err)
	}
	// A full buffer is a line too long, not a head too large.
	r = NewReader(strings.NewReader(strings.Repeat("a", DefaultBufferSize+1)))
	if _, err := r.readLine(DefaultBufferSize + 100); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("full buffer: err = %v, want ErrLineTooLong", err)
	}
}

// TestReaderNoProgress checks that a connection returning neither data
// nor an error does not spin.
func TestReaderNoProgress(t *testing.T) {
	r := NewReader(zeroReader{})
	if _, err := r.ReadHead(DefaultMaxHeadBytes); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("err = %v, want io.ErrNoProgress", err)
	}
	if n, err := r.Read(nil); n != 0 || err != nil {
		t.Fatalf("Read(nil) = %d %v", n, err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// TestReadHeadLimit checks that a head which reaches max bytes without its
// end is refused, even when the end would follow in the next read.
func TestReadHeadLimit(t *testing.T) {
	const max = 100
	start := "GET / HTTP/1.1\r\nHost: h\r\nX: "
	r := NewReader(&splitReader{parts: []string{start + strings.Repeat("a", max-len(start)), "\r\n\r\n"}})
	if head, err := r.ReadHead(max); !errors.Is(err, ErrHeaderTooLarge) {
		t.Fatalf("head of %d bytes with max %d: %q, %v", len(head), max, head, err)
	}
}

// TestReleaseTwice checks that Release drops the buffer and may be called
// again.
func TestReleaseTwice(t *testing.T) {
	r := NewReader(strings.NewReader("GET / HTTP/1.1\r\nHost: h\r\n\r\n"))
	if _, err := r.ReadHead(DefaultMaxHeadBytes); err != nil {
		t.Fatal(err)
	}
	r.Release()
	if r.buf != nil {
		t.Fatal("Release kept the buffer")
	}
	r.Release()
}

// staleReader returns a Reader whose buffer is filled with stale '\n'
// bytes, as a reused pool buffer may be: nothing past the bytes read may
// be taken for data.
func staleReader(parts ...string) *Reader {
	r := NewReader(&splitReader{parts: parts})
	for i := range r.buf {
		r.buf[i] = '\n'
	}
	return r
}

// TestReadHeadStaleBuffer checks that the skipping of empty lines before
// a head never looks past the bytes read.
func TestReadHeadStaleBuffer(t *testing.T) {
	const req = "GET / HTTP/1.1\r\nHost: h\r\n\r\n"
	r := staleReader("\r\n", req)
	head, err := r.ReadHead(DefaultMaxHeadBytes)
	if err != nil || string(head) != req {
		t.Fatalf("CRLF, then a request: head %q, %v", head, err)
	}
	// A lone CR at the end of a read, followed by a request line: the CR
	// is not an empty line and stays in the head, which is malformed.
	r = staleReader("\r", req)
	head, err = r.ReadHead(DefaultMaxHeadBytes)
	var parsed Request
	if err != nil || string(head) != "\r"+req || ParseRequest(head, &parsed) == nil {
		t.Fatalf("lone CR, then a request: head %q, %v", head, err)
	}
}

// TestReadHeadEnds checks where a head ends: at the first empty line, even
// when a line before it starts with a bare CR.
func TestReadHeadEnds(t *testing.T) {
	raw := "GET / HTTP/1.1\r\nHost: h\r\n\rX: 1\r\n\r\nNEXT"
	r := NewReader(strings.NewReader(raw))
	head, err := r.ReadHead(DefaultMaxHeadBytes)
	if err != nil || string(head) != strings.TrimSuffix(raw, "NEXT") || string(r.Buffered()) != "NEXT" {
		t.Fatalf("head %q, left %q, %v", head, r.Buffered(), err)
	}
	// Only empty lines, then the connection closes: a clean end.
	r = NewReader(strings.NewReader("\r\n\r\n"))
	if _, err := r.ReadHead(DefaultMaxHeadBytes); !errors.Is(err, io.EOF) {
		t.Fatalf("empty lines then EOF: %v, want io.EOF", err)
	}
	r = NewReader(strings.NewReader(req2 + "\r\n"))
	if _, err := r.ReadHead(DefaultMaxHeadBytes); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadHead(DefaultMaxHeadBytes); !errors.Is(err, io.EOF) {
		t.Fatalf("a request, an empty line, EOF: %v, want io.EOF", err)
	}
}

const req2 = "GET /2 HTTP/1.1\r\nHost: h\r\n\r\n"

// TestReadHeadLimitPipelined checks that the head limit counts the bytes
// of the head being read, not those of the heads before it.
func TestReadHeadLimitPipelined(t *testing.T) {
	first := "GET /1 HTTP/1.1\r\nHost: h\r\nX: " + strings.Repeat("a", 40) + "\r\n\r\n"
	second := "GET /2 HTTP/1.1\r\nHost: h\r\nX: " + strings.Repeat("b", 40) + "\r\n\r\n"
	const max = 100
	if len(first) >= max || len(second) >= max || len(first)+len(second) < max {
		t.Fatal("bad test sizes")
	}
	r := NewReader(&splitReader{parts: []string{first + second[:30], second[30:]}})
	for i, want := range []string{first, second} {
		head, err := r.ReadHead(max)
		if err != nil || string(head) != want {
			t.Fatalf("head %d: %q, %v", i, head, err)
		}
	}
}
