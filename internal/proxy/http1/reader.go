// Package http1 is the proxy's HTTP/1.1 codec: a buffered connection reader
// that finds message heads, a parser that splits a head into a reusable
// header slice (no maps, no copies), body readers for Content-Length,
// chunked and close-delimited bodies, and helpers that append heads and
// chunks to a write buffer; on Linux, raw non-blocking socket I/O and the
// Parker, which holds idle keep-alive connections in one epoll set.
//
// Everything here but the Parker is for one goroutine at a time. Slices handed out by a
// Reader (a head, header names and values) alias its buffer and stay valid
// only until the next call that reads from that Reader.
package http1

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// Errors returned by the codec. Callers map ErrHeaderTooLarge and
// ErrTooManyHeaders to 431 and ErrMalformed to 400.
var (
	ErrHeaderTooLarge = errors.New("http1: message head too large")
	ErrTooManyHeaders = errors.New("http1: too many header fields")
	ErrMalformed      = errors.New("http1: malformed message")
	ErrLineTooLong    = errors.New("http1: chunk line too long")
)

const (
	// DefaultBufferSize is the initial read buffer; it grows only for heads
	// that don't fit.
	DefaultBufferSize = 8 << 10
	// DefaultMaxHeadBytes bounds a message head (request/status line and
	// header fields), like net/http's MaxHeaderBytes we used before.
	DefaultMaxHeadBytes = 60 << 10
)

var bufPool = sync.Pool{New: func() any { b := make([]byte, DefaultBufferSize); return &b }}

// Reader is a buffered reader over a connection.
type Reader struct {
	rd  io.Reader
	buf []byte
	big bool // buf was grown past DefaultBufferSize (not from the pool)
	// pb is the pool's pointer to buf while buf is pooled (not big): the
	// buffer goes back through it, without allocating a slice header.
	pb   *[]byte
	r, w int // buf[r:w] is unread
	scan int // where the search for the end of the head resumes
	// lineOK is set once the request line of the head being read was
	// seen to end in an HTTP version (ReadRequestHead).
	lineOK bool
}

// NewReader returns a Reader over rd with a pooled buffer; call Release
// when done with it.
func NewReader(rd io.Reader) *Reader {
	pb := bufPool.Get().(*[]byte)
	return &Reader{rd: rd, buf: *pb, pb: pb}
}

// Release returns the buffer to the pool. The Reader must not be used after.
func (b *Reader) Release() {
	if b.buf != nil && !b.big {
		bufPool.Put(b.pb)
	}
	b.buf, b.pb = nil, nil
}

// Buffered returns the bytes read from the connection and not consumed yet.
func (b *Reader) Buffered() []byte { return b.buf[b.r:b.w] }

// Discard consumes n buffered bytes (n <= len(Buffered())).
func (b *Reader) Discard(n int) { b.r += n }

// compact moves unread bytes to the front of the buffer. It invalidates
// slices handed out before.
func (b *Reader) compact() {
	if b.r > 0 {
		n := copy(b.buf, b.buf[b.r:b.w])
		b.scan -= b.r
		if b.scan < 0 {
			b.scan = 0
		}
		b.r, b.w = 0, n
	}
}

// fill reads once from the connection into free space, compacting or
// growing the buffer (up to limit bytes unread) as needed.
func (b *Reader) fill(limit int) error {
	if b.w == len(b.buf) {
		b.compact()
	}
	if b.w == len(b.buf) {
		if len(b.buf) >= limit {
			return ErrHeaderTooLarge
		}
		n := 2 * len(b.buf)
		if n > limit {
			n = limit
		}
		nb := make([]byte, n)
		copy(nb, b.buf[:b.w])
		if !b.big {
			bufPool.Put(b.pb)
		}
		b.buf, b.pb, b.big = nb, nil, true
	}
	n, err := b.rd.Read(b.buf[b.w:])
	b.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// Fill reads once from the connection (up to the free buffer space),
// blocking until something arrives. It returns io.EOF when the connection
// ended. Callers use it to wait for the start of the next message.
func (b *Reader) Fill() error {
	if b.r == b.w {
		b.r, b.w, b.scan = 0, 0, 0
	}
	return b.fill(len(b.buf))
}

// Shrink gives a buffer that a large head grew back, keeping the unread
// bytes, when they fit in the default size: an idle connection then holds
// DefaultBufferSize again.
func (b *Reader) Shrink() {
	if !b.big || b.w-b.r > DefaultBufferSize {
		return
	}
	pb := bufPool.Get().(*[]byte)
	nb := *pb
	n := copy(nb, b.buf[b.r:b.w])
	b.scan -= b.r
	if b.scan < 0 {
		b.scan = 0
	}
	b.buf, b.pb, b.big, b.r, b.w = nb, pb, false, 0, n
}

// ReadRequestHead is ReadHead for a request: a request line that doesn't
// end in an HTTP version (HTTP/0.9, or garbage) is ErrMalformed as soon as
// it is complete, rather than waiting for a head that never comes.
func (b *Reader) ReadRequestHead(max int) ([]byte, error) {
	b.lineOK = false
	return b.readHead(max, true)
}

// ReadHead returns the next message head, up to and including the empty
// line that ends it, skipping empty lines before it. It returns io.EOF when
// the connection ends cleanly before a head starts, io.ErrUnexpectedEOF when
// it ends inside one, and ErrHeaderTooLarge past max bytes.
func (b *Reader) ReadHead(max int) ([]byte, error) { return b.readHead(max, false) }

func (b *Reader) readHead(max int, request bool) ([]byte, error) {
	if b.r == b.w {
		b.r, b.w, b.scan = 0, 0, 0
	}
	if b.scan < b.r {
		b.scan = b.r
	}
	for {
		// Leading CRLFs between messages are ignored (RFC 9112 §2.2).
		for b.r < b.w && (b.buf[b.r] == '\r' || b.buf[b.r] == '\n') {
			if b.buf[b.r] == '\r' && (b.r+1 >= b.w || b.buf[b.r+1] != '\n') {
				break
			}
			b.r++
		}
		if b.scan < b.r {
			b.scan = b.r
		}
		if end := headEnd(b.buf[b.r:b.w], b.scan-b.r); end >= 0 {
			if end > max {
				// The whole head arrived in fewer reads than max bytes
				// take (a buffer larger than max, or bytes read ahead
				// before this call): it is past the limit all the same.
				return nil, ErrHeaderTooLarge
			}
			head := b.buf[b.r : b.r+end]
			b.r += end
			b.scan = b.r
			return head, nil
		}
		if request && !b.lineOK {
			if err := b.checkRequestLine(); err != nil {
				return nil, err
			}
		}
		b.scan = b.w - 3 // the terminator may straddle reads
		if b.scan < b.r {
			b.scan = b.r
		}
		if b.w-b.r >= max {
			return nil, ErrHeaderTooLarge
		}
		start := b.w - b.r
		if err := b.fill(max); err != nil {
			if errors.Is(err, io.EOF) {
				if start == 0 {
					return nil, io.EOF
				}
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// checkRequestLine looks at the request line of a head that is not
// complete yet. It is only called on that slow path, and the line is
// scanned from where the head scan stopped, so a head trickling in byte by
// byte is not rescanned from its start.
func (b *Reader) checkRequestLine() error {
	from := b.scan
	if from < b.r {
		from = b.r
	}
	i := bytes.IndexByte(b.buf[from:b.w], '\n')
	if i < 0 {
		return nil // not complete yet
	}
	// The first '\n' at or after scan is the request line's only if no
	// earlier one exists; scan never passes the first line's end without
	// this check having run, so it is.
	line := b.buf[b.r : from+i]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if n := len(line); n < 9 || string(line[n-8:n-3]) != "HTTP/" || line[n-9] != ' ' {
		return ErrMalformed
	}
	b.lineOK = true
	return nil
}

// headEnd returns the length of the head in p (through "\n\r\n" or
// "\n\n"), searching from from, or -1.
func headEnd(p []byte, from int) int {
	for i := from; i < len(p); {
		j := bytes.IndexByte(p[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
		if i < len(p) && p[i] == '\n' {
			return i + 1
		}
		if i+1 < len(p) && p[i] == '\r' && p[i+1] == '\n' {
			return i + 2
		}
	}
	return -1
}

// Read reads body bytes: buffered bytes first, then straight from the
// connection into p (no copy through the buffer).
func (b *Reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.r < b.w {
		n := copy(p, b.buf[b.r:b.w])
		b.r += n
		return n, nil
	}
	return b.rd.Read(p)
}

// readLine returns the next line without its line ending, reading more as
// needed, up to max bytes.
func (b *Reader) readLine(max int) ([]byte, error) {
	from := b.r
	for {
		if i := bytes.IndexByte(b.buf[from:b.w], '\n'); i >= 0 {
			end := from + i
			line := b.buf[b.r:end]
			b.r = end + 1
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			return line, nil
		}
		if b.w-b.r >= max {
			return nil, ErrLineTooLong
		}
		off := b.w - b.r
		if err := b.fill(len(b.buf)); err != nil {
			switch {
			case errors.Is(err, io.EOF):
				err = io.ErrUnexpectedEOF
			case errors.Is(err, ErrHeaderTooLarge):
				err = ErrLineTooLong
			}
			return nil, err
		}
		from = b.r + off
	}
}
