// Package http2 is the proxy's side of the downstream HTTP/2 codec that
// x/net/http2 (which parses and writes the frames) does not have: Guard
// protects a connection against the floods that x/net/http2 lets through,
// by watching the frames that cross it (x/net does not expose them):
//
//   - Rapid reset (CVE-2023-44487): a client that opens streams and resets
//     them at once makes the proxy start (and abandon) an upstream request
//     per stream. Envoy counts "premature" resets, a stream the client
//     reset before any response went out and within a second of its
//     start, and closes the connection once they are at least half of its
//     first 500 streams, or half of all its streams after that
//     (ConnectionManagerImpl::maybeDrainDueToPrematureResets in
//     source/common/http/conn_manager_impl.cc, runtime
//     overload.premature_reset_total_stream_count 500 and
//     overload.premature_reset_min_stream_lifetime_seconds 1).
//   - A header block left open: a HEADERS frame without END_HEADERS
//     holds the connection (no other frame may follow but its
//     CONTINUATION, RFC 9113 §6.10) before any stream exists for the HCM
//     to time. request_headers_timeout bounds it here: the socket's read
//     deadline is the block's, and once it passes the connection ends
//     with GOAWAY (ENHANCE_YOUR_CALM), as Envoy ends a request whose
//     headers did not arrive in time (ActiveStream::onRequestHeaderTimeout
//     in source/common/http/conn_manager_impl.cc).
//   - Empty frames: Envoy's codec closes a connection on more than
//     max_consecutive_inbound_frames_with_empty_payload (default 1; strait
//     refuses other values) consecutive HEADERS, CONTINUATION or DATA
//     frames with no payload and no END_STREAM
//     (ConnectionImpl::trackInboundFrames in
//     source/common/http/http2/codec_impl.cc).
//
// The guard reads ahead (up to guardBuffer bytes, what one read of the
// socket returns) and counts a reset when it reads it, before x/net
// processes the frames before it: a burst of HEADERS+RST_STREAM is
// counted as it arrives and the connection ends before x/net started
// the burst's handlers. Once a limit is passed, the read side returns a
// ConnectionError, for which x/net sends GOAWAY (ENHANCE_YOUR_CALM, as for
// its own flood limits) with the last stream it processed and closes the
// connection; the bytes read ahead are dropped (the client learns from
// the GOAWAY which streams were not processed).
package http2

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	xhttp2 "golang.org/x/net/http2"
)

const (
	// prematureResetLimit is overload.premature_reset_total_stream_count.
	prematureResetLimit = 500
	// prematureResetMinLifetime is
	// overload.premature_reset_min_stream_lifetime_seconds: a stream that
	// lived longer (in whole seconds) is not premature.
	prematureResetMinLifetime = 1
	// prematureResetFloor is Strait's stricter bound: a connection whose
	// premature resets reach it and are at least half of its ended
	// streams is closed too. Envoy's rule alone lets an attacker who
	// paces HEADERS+RST_STREAM (each reset read after the proxy has
	// already forwarded its request) cost the backend up to 250
	// requests per connection; this keeps it to a few dozen, while a
	// client that resets a minority of its streams is never closed.
	prematureResetFloor = 20
	// maxEmptyFrames is max_consecutive_inbound_frames_with_empty_payload.
	maxEmptyFrames = 1
	// guardBuffer is the read-ahead.
	guardBuffer = 16 << 10
	// guardMaxStreams bounds the streams the guard follows; streams
	// past it (the server refuses or ignores them) are not counted.
	guardMaxStreams = 4096
)

// errTooManyResets, errEmptyFrames and errHeadersTimedOut end a
// connection: x/net's server answers a ConnectionError from a read with
// GOAWAY and its code.
var (
	errTooManyResets   = xhttp2.ConnectionError(xhttp2.ErrCodeEnhanceYourCalm)
	errEmptyFrames     = xhttp2.ConnectionError(xhttp2.ErrCodeEnhanceYourCalm)
	errHeadersTimedOut = xhttp2.ConnectionError(xhttp2.ErrCodeEnhanceYourCalm)
)

// Frame types and flags the guard reads (RFC 9113 §6).
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameContinuation = 0x9
	flagEndStream     = 0x1
	flagEndHeaders    = 0x4
)

// Guard is the downstream HTTP/2 connection x/net reads and writes.
// Read is called by x/net's frame reader only, Write by the connection's
// one writer (wbatch); mu guards what both sides touch.
type Guard struct {
	net.Conn

	// Owned by the reader. (The fields are in an order that leaves no
	// padding: a parked connection keeps its guard.)
	buf    []byte // read ahead: buf[r:w] is still to be returned; nil when drained
	readFn func(fd uintptr) bool
	rerr0  error // fill's read error
	rerr   error // the socket's error, returned once buf is drained
	err    error // set once a limit was passed; every later read fails
	// headersTimeout is request_headers_timeout (0: none); blockEnd is
	// when the header block in progress must have ended, on the monotonic
	// clock (monoNow; 0: none open): 8 bytes where a time.Time is 24.
	headersTimeout time.Duration
	blockEnd       time.Duration
	in             frameSplitter
	rn             int32 // fill's result
	r, w           int32
	preface        int32 // bytes of the client preface observe still skips
	unread         int32 // bytes of the client preface not yet returned by Read
	empty          int32 // consecutive empty frames
	// idle is set while the read deadline is ArmIdle's (guard_park.go).
	idle atomic.Bool

	// Owned by the writer.
	out frameSplitter

	mu        sync.Mutex // guards the fields below
	maxStream uint32     // the highest stream the client opened
	streams   map[uint32]stream
	// closed counts the streams ended, not by the server's reset, and
	// premature those of them the client reset prematurely (at most
	// 2^30 each: the client's stream ids).
	closed, premature int32
}

// stream is what the guard knows of one open stream.
type stream struct {
	opened    time.Time
	responded bool // the server sent HEADERS on it
}

// NewGuard guards c; headersTimeout is request_headers_timeout (0: none).
func NewGuard(c net.Conn, headersTimeout time.Duration) *Guard {
	g := &Guard{}
	g.Init(c, headersTimeout)
	return g
}

// Init makes g, a zero Guard (one a larger struct holds, so that a
// connection's state is one allocation), guard c.
func (g *Guard) Init(c net.Conn, headersTimeout time.Duration) {
	g.Conn, g.headersTimeout = c, headersTimeout
	g.preface, g.unread = int32(len(xhttp2.ClientPreface)), int32(len(xhttp2.ClientPreface))
}

// blockTimedOut reports whether err is the read deadline of a header block
// left open past request_headers_timeout (and then sets g.err).
func (g *Guard) blockTimedOut(err error) bool {
	if err == nil || g.blockEnd == 0 || monoNow() < g.blockEnd {
		return false
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		return false
	}
	g.err = errHeadersTimedOut
	return true
}

func (g *Guard) Read(p []byte) (int, error) {
	for {
		between := g.betweenFrames()
		n, err := g.read(p)
		if err == nil || !g.idle.Load() || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		// ArmIdle's deadline: between frames the connection is idle;
		// within one it was not, and reads on.
		g.idle.Store(false)
		_ = g.Conn.SetReadDeadline(g.blockDeadline())
		if n > 0 {
			return n, nil
		}
		if between {
			return 0, ErrIdle
		}
	}
}

func (g *Guard) read(p []byte) (int, error) {
	if g.r == g.w {
		if g.err != nil {
			return 0, g.err
		}
		if g.rerr != nil {
			return 0, g.rerr
		}
		if len(p) >= guardBuffer {
			// A large read (a DATA payload): straight into p.
			n, err := g.Conn.Read(p)
			if g.blockTimedOut(err) && n == 0 {
				return 0, g.err
			}
			if g.observe(p[:n]) {
				n = min(n, int(g.unread)) // only what is left of the preface
			}
			g.unread -= int32(min(int(g.unread), n))
			if g.err != nil && n == 0 {
				return 0, g.err
			}
			return n, err
		}
		n, ok, err := g.fill() // guard_wait_linux.go: no buffer held while waiting
		if !ok {
			if g.buf == nil {
				g.buf = getGuardBuf()
			}
			n, err = g.Conn.Read(g.buf)
		}
		if g.blockTimedOut(err) {
			g.release()
			return 0, g.err
		}
		g.r, g.w, g.rerr = 0, int32(n), err
		if g.observe(g.buf[:n]) {
			// Past a limit: x/net gets what is left of the client
			// preface (else it would close without GOAWAY), then the
			// error.
			g.w = int32(min(n, int(g.unread)))
		}
		if g.r == g.w {
			g.release()
			if g.err != nil {
				return 0, g.err
			}
			g.rerr = nil
			return 0, err
		}
	}
	n := copy(p, g.buf[g.r:g.w])
	g.r += int32(n)
	g.unread -= int32(min(int(g.unread), n))
	if g.r == g.w {
		g.release()
	}
	return n, nil
}

// guardBufs pools the read-ahead buffers: a connection holds one only
// between the bytes' arrival and their consumption.
// It holds array pointers: putting one back allocates nothing (a *[]byte
// made at each Put would).
var guardBufs = sync.Pool{New: func() any { return new([guardBuffer]byte) }}

func getGuardBuf() []byte { return guardBufs.Get().(*[guardBuffer]byte)[:] }

func putGuardBuf(b []byte) {
	if cap(b) == guardBuffer {
		guardBufs.Put((*[guardBuffer]byte)(b[:guardBuffer]))
	}
}

// release gives the drained read-ahead buffer back to the pool (reader
// only).
func (g *Guard) release() {
	if g.buf != nil {
		putGuardBuf(g.buf)
		g.buf = nil
	}
	g.r, g.w = 0, 0
}

// observe follows the client's frames in b; it reports whether a limit
// was passed (g.err is then set).
func (g *Guard) observe(b []byte) bool {
	if g.preface > 0 {
		n := min(int(g.preface), len(b))
		g.preface -= int32(n)
		b = b[n:]
	}
	g.in.feed(b, g.inbound)
	return g.err != nil
}

// inbound is called for each frame header the client sends.
func (g *Guard) inbound(h frameHeader) {
	if g.err != nil {
		return
	}
	switch h.typ {
	case frameData, frameHeaders, frameContinuation:
		if h.length == 0 && h.flags&flagEndStream == 0 {
			if g.empty++; g.empty > maxEmptyFrames {
				g.err = errEmptyFrames
				return
			}
		} else {
			g.empty = 0
		}
	}
	switch h.typ {
	case frameHeaders, frameContinuation:
		g.headerBlock(h)
	}
	switch h.typ {
	case frameHeaders:
		g.mu.Lock()
		if h.stream > g.maxStream && h.stream%2 == 1 {
			g.maxStream = h.stream
			if g.streams == nil {
				g.streams = map[uint32]stream{} // dropped by Detach
			}
			if len(g.streams) < guardMaxStreams {
				g.streams[h.stream] = stream{opened: time.Now()}
			}
		}
		g.mu.Unlock()
	case frameRSTStream:
		g.mu.Lock()
		if s, ok := g.streams[h.stream]; ok {
			delete(g.streams, h.stream)
			g.closed++
			if !s.responded && int64(time.Since(s.opened)/time.Second) <= prematureResetMinLifetime {
				g.premature++
			}
			if g.tooManyPrematureResets() {
				g.err = errTooManyResets
			}
		}
		g.mu.Unlock()
	}
}

// headerBlock follows header blocks for request_headers_timeout: a
// HEADERS without END_HEADERS opens one, under a read deadline; the frame
// with END_HEADERS closes it and lifts the deadline. Reader only.
func (g *Guard) headerBlock(h frameHeader) {
	if g.headersTimeout <= 0 {
		return
	}
	switch {
	case h.flags&flagEndHeaders != 0:
		if g.blockEnd != 0 {
			g.blockEnd = 0
			_ = g.Conn.SetReadDeadline(time.Time{})
		}
	case h.typ == frameHeaders:
		g.blockEnd = monoNow() + g.headersTimeout // > 0, as headersTimeout is
		_ = g.Conn.SetReadDeadline(g.blockDeadline())
	}
}

// blockDeadline is blockEnd as a read deadline (zero: none).
func (g *Guard) blockDeadline() time.Time {
	if g.blockEnd == 0 {
		return time.Time{}
	}
	return monoEpoch.Add(g.blockEnd)
}

// monoEpoch is where monoNow counts from: a time with a monotonic reading,
// so that the durations since it, and the times made from them, follow the
// monotonic clock as time.Now's do.
var monoEpoch = time.Now()

// monoNow is the time since monoEpoch.
func monoNow() time.Duration { return time.Since(monoEpoch) }

// tooManyPrematureResets is Envoy's maybeDrainDueToPrematureResets
// decision, with prematureResetFloor (mu held).
func (g *Guard) tooManyPrematureResets() bool {
	return prematureResetsTooMany(int(g.premature), int(g.closed))
}

// prematureResetsTooMany decides on premature resets among closed ended
// streams.
func prematureResetsTooMany(premature, closed int) bool {
	if premature >= prematureResetFloor && premature*2 >= closed {
		return true
	}
	if closed < prematureResetLimit {
		return premature*2 >= prematureResetLimit
	}
	return premature*2 >= closed
}

func (g *Guard) Write(p []byte) (int, error) {
	g.out.feed(p, g.outbound)
	return g.Conn.Write(p)
}

// outbound is called for each frame header the server sends. Any HEADERS
// counts as the response having started (x/net sends 1xx responses only
// for Expect: 100-continue).
func (g *Guard) outbound(h frameHeader) {
	switch h.typ {
	case frameHeaders, frameData, frameRSTStream:
	default:
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := g.streams[h.stream]
	if !ok {
		return
	}
	switch {
	case h.typ == frameRSTStream:
		delete(g.streams, h.stream) // reset by the server: not counted
	case h.flags&flagEndStream != 0:
		delete(g.streams, h.stream)
		g.closed++
	case h.typ == frameHeaders && !s.responded:
		s.responded = true
		g.streams[h.stream] = s
	}
}

// frameHeader is the part of an HTTP/2 frame header the guard reads.
type frameHeader struct {
	length int
	typ    byte
	flags  byte
	stream uint32
}

// frameSplitter finds the frame headers in a byte stream fed in pieces of
// any size.
type frameSplitter struct {
	hdr  [9]byte
	hn   uint8 // bytes of hdr filled
	skip int32 // payload bytes of the current frame still to skip (at most 2^24-1)
}

func (s *frameSplitter) feed(b []byte, frame func(frameHeader)) {
	for len(b) > 0 {
		if s.skip > 0 {
			n := min(int(s.skip), len(b))
			s.skip -= int32(n)
			b = b[n:]
			continue
		}
		n := copy(s.hdr[s.hn:], b)
		s.hn += uint8(n)
		b = b[n:]
		if int(s.hn) < len(s.hdr) {
			return
		}
		s.hn = 0
		h := frameHeader{
			length: int(s.hdr[0])<<16 | int(s.hdr[1])<<8 | int(s.hdr[2]),
			typ:    s.hdr[3],
			flags:  s.hdr[4],
			stream: (uint32(s.hdr[5])<<24 | uint32(s.hdr[6])<<16 | uint32(s.hdr[7])<<8 | uint32(s.hdr[8])) & (1<<31 - 1),
		}
		s.skip = int32(h.length)
		frame(h)
	}
}

var _ net.Conn = (*Guard)(nil)
