package http1

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestRequestLineEarlyCheck checks ReadRequestHead's look at a request line
// that is complete while the head is not: a line ending in " HTTP/x.y"
// (9 bytes at least, with a bare LF or CRLF) lets the head be read; any
// other line is ErrMalformed without waiting for the rest.
func TestRequestLineEarlyCheck(t *testing.T) {
	tests := []struct {
		name  string
		parts []string
		ok    bool
	}{
		{"CRLF", []string{"GET / HTTP/1.1\r\n", "Host: h\r\n\r\n"}, true},
		{"bare LF", []string{"GET / HTTP/1.1\n", "Host: h\n\n"}, true},
		{"9 bytes", []string{" HTTP/1.1\r\n", "X: y\r\n\r\n"}, true},
		{"9 bytes, bare LF", []string{" HTTP/1.1\n", "X: y\n\n"}, true},
		{"8 bytes", []string{"HTTP/1.1\r\n", "X: y\r\n\r\n"}, false},
		{"HTTP/0.9", []string{"GET /\r\n", "Host: h\r\n\r\n"}, false},
		{"no space before version", []string{"GET /HTTP/1.1\r\n", "Host: h\r\n\r\n"}, false},
		{"not HTTP", []string{"GET / XTTP/1.1\r\n", "Host: h\r\n\r\n"}, false},
		{"line after leading CRLFs", []string{"\r\n\r\nGET / HTTP/1.1\r\n", "Host: h\r\n\r\n"}, true},
		{"line in pieces", []string{"GET / HT", "TP/1.1\r", "\nHost: h\r\n", "\r\n"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(&splitReader{parts: append([]string(nil), tc.parts...)})
			defer r.Release()
			head, err := r.ReadRequestHead(DefaultMaxHeadBytes)
			if !tc.ok {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("head %q, err %v; want ErrMalformed", head, err)
				}
				return
			}
			want := strings.TrimLeft(strings.Join(tc.parts, ""), "\r\n")
			if err != nil || string(head) != want {
				t.Fatalf("head %q, err %v; want %q", head, err, want)
			}
		})
	}
}

// TestFill checks that Fill appends to unread bytes, starts at the front
// of the buffer once everything was consumed, and reports io.EOF.
func TestFill(t *testing.T) {
	r := NewReader(&splitReader{parts: []string{"ab", "cd", "ef"}})
	defer r.Release()
	for _, want := range []string{"ab", "abcd"} {
		if err := r.Fill(); err != nil || string(r.Buffered()) != want {
			t.Fatalf("Fill: buffered %q, err %v; want %q", r.Buffered(), err, want)
		}
	}
	r.Discard(4)
	if err := r.Fill(); err != nil || string(r.Buffered()) != "ef" || r.r != 0 {
		t.Fatalf("Fill after consuming all: buffered %q at %d, err %v; want \"ef\" at 0", r.Buffered(), r.r, err)
	}
	r.Discard(2)
	if err := r.Fill(); !errors.Is(err, io.EOF) {
		t.Fatalf("Fill at the end: %v, want io.EOF", err)
	}
}

// TestShrinkLimit checks Shrink at its limit: unread bytes of exactly
// DefaultBufferSize move to a default buffer, one more keeps the grown one;
// either way the unread bytes are kept. A buffer that never grew is kept
// as is.
func TestShrinkLimit(t *testing.T) {
	// A head of more than 2*DefaultBufferSize grows the buffer to
	// 4*DefaultBufferSize; the bytes after it are read with it.
	head := "GET / HTTP/1.1\r\nHost: h\r\nX: " + strings.Repeat("a", 2*DefaultBufferSize+100) + "\r\n\r\n"
	for _, tc := range []struct {
		unread int
		shrunk bool
	}{
		{1, true},
		{DefaultBufferSize, true},
		{DefaultBufferSize + 1, false},
	} {
		tail := strings.Repeat("b", tc.unread-1) + "c"
		r := NewReader(strings.NewReader(head + tail))
		got, err := r.ReadHead(DefaultMaxHeadBytes)
		if err != nil || len(got) != len(head) {
			t.Fatalf("head of %d bytes: read %d, %v", len(head), len(got), err)
		}
		if !r.big || len(r.Buffered()) != tc.unread {
			t.Fatalf("unread %d: big %v, %d bytes buffered", tc.unread, r.big, len(r.Buffered()))
		}
		r.Shrink()
		if shrunk := !r.big && len(r.buf) == DefaultBufferSize; shrunk != tc.shrunk {
			t.Errorf("unread %d: shrunk %v (big %v, %d bytes), want %v", tc.unread, shrunk, r.big, len(r.buf), tc.shrunk)
		}
		if string(r.Buffered()) != tail {
			t.Errorf("unread %d: %d bytes buffered after Shrink, want the %d read", tc.unread, len(r.Buffered()), len(tail))
		}
		r.Release()
	}

	r := NewReader(strings.NewReader("GET / HTTP/1.1\r\nHost: h\r\n\r\nrest"))
	defer r.Release()
	if _, err := r.ReadHead(DefaultMaxHeadBytes); err != nil {
		t.Fatal(err)
	}
	before := &r.buf[0]
	r.Shrink()
	if &r.buf[0] != before || string(r.Buffered()) != "rest" {
		t.Fatalf("Shrink replaced a default buffer (buffered %q)", r.Buffered())
	}
}

// TestHostCharRanges checks the ends of the ranges of bytes a Host and an
// absolute-form authority may hold.
func TestHostCharRanges(t *testing.T) {
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"09", true},
		{"az", true},
		{"AZ", true},
		{"a:9", true},
		{"[::1]:8", true},
		{"a\\", false},
		{"a`", false},
		{"a{", false},
		{"a^", false},
		{"a\"", false},
		{"a\x80", false},
	} {
		for _, raw := range []string{
			"GET / HTTP/1.1\r\nHost: " + tc.host + "\r\n\r\n",
			"GET http://" + tc.host + "/ HTTP/1.1\r\nHost: h\r\n\r\n",
		} {
			var req Request
			err := ParseRequest([]byte(raw), &req)
			if tc.ok && (err != nil || string(req.Host) != tc.host) {
				t.Errorf("%q: host %q, err %v; want %q", raw, req.Host, err, tc.host)
			}
			if !tc.ok && !errors.Is(err, ErrMalformed) {
				t.Errorf("%q: err %v, want ErrMalformed", raw, err)
			}
		}
	}
}

// TestAuthorityUserinfo checks that userinfo is cut from an absolute-form
// authority at its last '@', also when it is empty, and that nothing left
// after it is ErrMalformed.
func TestAuthorityUserinfo(t *testing.T) {
	for _, tc := range []struct {
		target, authority string
	}{
		{"http://@h/p", "h"},
		{"http://u@h/p", "h"},
		{"http://u@v@h?q", "h"},
		{"http://@", ""},
		{"http://u@/p", ""},
	} {
		var req Request
		err := ParseRequest([]byte("GET "+tc.target+" HTTP/1.1\r\nHost: x\r\n\r\n"), &req)
		if tc.authority == "" {
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("%s: authority %q, err %v; want ErrMalformed", tc.target, req.Authority, err)
			}
			continue
		}
		if err != nil || string(req.Authority) != tc.authority || string(req.Host) != tc.authority {
			t.Errorf("%s: authority %q host %q, err %v; want %q", tc.target, req.Authority, req.Host, err, tc.authority)
		}
	}
}

// TestWholeHeadLimit: a head past max is ErrHeaderTooLarge also when it
// arrives whole in one read that the buffer (8 KiB) holds, and when it
// arrives in pieces; a head of exactly max bytes is read.
func TestWholeHeadLimit(t *testing.T) {
	head := func(n int) string {
		h := "GET / HTTP/1.1\r\nX-Pad: "
		return h + strings.Repeat("p", n-len(h)-4) + "\r\n\r\n"
	}
	const max = 1 << 10
	for _, tc := range []struct {
		name  string
		parts []string
		ok    bool
	}{
		{"one read, past max", []string{head(2 << 10)}, false},
		{"one read, max", []string{head(max)}, true},
		{"one read, max+1", []string{head(max + 1)}, false},
		{"pieces, past max", []string{head(2 << 10)[:100], head(2 << 10)[100:]}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(&splitReader{parts: append([]string(nil), tc.parts...)})
			defer r.Release()
			_, err := r.ReadRequestHead(max)
			if tc.ok != (err == nil) || !tc.ok && !errors.Is(err, ErrHeaderTooLarge) {
				t.Fatalf("err %v, want ok=%v (else ErrHeaderTooLarge)", err, tc.ok)
			}
		})
	}
}

// TestIncompleteHeadAtLimit: a head that has reached max bytes without its
// end is ErrHeaderTooLarge at once, without waiting for more (here the
// connection then ends); one byte short of max still waits, and the end
// of the connection is then io.ErrUnexpectedEOF.
func TestIncompleteHeadAtLimit(t *testing.T) {
	const max = 1 << 10
	part := func(n int) string {
		h := "GET / HTTP/1.1\r\nX-Pad: "
		return h + strings.Repeat("p", n-len(h))
	}
	for _, tc := range []struct {
		n    int
		want error
	}{
		{max, ErrHeaderTooLarge},
		{max - 1, io.ErrUnexpectedEOF},
	} {
		r := NewReader(&splitReader{parts: []string{part(tc.n)}})
		_, err := r.ReadRequestHead(max)
		r.Release()
		if !errors.Is(err, tc.want) {
			t.Errorf("%d bytes of an unfinished head, then EOF: err %v, want %v", tc.n, err, tc.want)
		}
	}
}
