// Package server is the proxy's downstream HTTP/2 connection, framed on
// x/net/http2's Framer and hpack as package client is upstream: the
// connection's one reader goroutine reads and dispatches every frame,
// streams are small structs, each stream's handler runs on a goroutine of
// its own (it waits for its upstream) and writes its frames itself under
// the connection's write lock, into one buffer that goes to a
// wbatch.Conn. No writer goroutine, no per-stream channel, no per-frame
// flush: x/net/http2's Server hands every frame from the handler to its
// serve loop and on to its writer goroutine, and flushes each.
//
// It keeps what x/net's server enforces, and adds RFC 9113's checks that
// x/net answers with 400 instead:
//
//   - SETTINGS (ours: MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE,
//     MAX_HEADER_LIST_SIZE; the peer's: INITIAL_WINDOW_SIZE,
//     MAX_FRAME_SIZE, HEADER_TABLE_SIZE), with a SETTINGS frame of more
//     than 100 settings or duplicates refused (PROTOCOL_ERROR), and an
//     ACK for each.
//   - Streams: client-initiated odd ids, increasing; past
//     MAX_CONCURRENT_STREAMS a new stream gets REFUSED_STREAM. A frame
//     for an idle stream is a connection error.
//   - Flow control both ways: a request body is buffered only up to the
//     windows we advertised (DATA past them is FLOW_CONTROL_ERROR), and a
//     response is sent only as the peer's windows allow; a peer that
//     does not read blocks its handlers' writes (wbatch's back-pressure)
//     and fails the connection once the frames it asks for (PING and
//     SETTINGS answers, resets) pile up past wbatch's backlog.
//   - Requests: pseudo-headers checked (present, known, not repeated,
//     before the regular fields; :scheme http or https; :path absolute
//     or "*"); connection-specific fields, uppercase names and a TE other
//     than "trailers" make the request malformed (PROTOCOL_ERROR, RFC
//     9113 §8.2.2 and §8.1.1); :protocol (extended CONNECT) is refused as
//     x/net refuses it by default; a head past MAX_HEADER_LIST_SIZE gets
//     431; content-length must match the DATA received.
//   - Floods: PRIORITY and WINDOW_UPDATE frames are bounded per stream
//     opened and DATA frame sent, as Envoy's codec bounds them
//     (ENHANCE_YOUR_CALM); rapid reset, empty frames and a header block
//     left open are the Guard's under this package (package http2).
//   - GOAWAY: graceful shutdown in two phases (GOAWAY with the largest
//     stream id and a PING, then, once the PING returns, GOAWAY with the
//     last stream processed), streams in progress finish, the connection
//     closes once they did; a peer's GOAWAY starts the same. Idle timeout
//     (no stream open) and keepalive PINGs as x/net's ReadIdleTimeout.
//   - Idle connections park (Config.Park, park.go): no goroutine, socket
//     or buffer of their own while no stream is open and nothing comes.
package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/http2/wire"
	"github.com/straitmesh/strait/internal/proxy/wbatch"
)

// Defaults for a zero Config field (x/net/http2's server's).
const (
	defaultMaxStreams   = 250
	defaultStreamWindow = 1 << 20
	defaultConnWindow   = 1 << 20
	defaultHeaderList   = 1<<20 + 320
	defaultPingTimeout  = 15 * time.Second
	maxStreamID         = 1<<31 - 1
	defaultMaxFrameSize = 16 << 10
	headerTableSize     = 4096
	// goAwayGrace is how long a closing connection waits for its peer to
	// read the last frames and close first (x/net's goAwayTimeout).
	goAwayGrace = time.Second
	// maxPriorityPerStream and maxWindowUpdatesPerData are Envoy's
	// max_inbound_priority_frames_per_stream and
	// max_inbound_window_update_frames_per_data_frame_sent.
	maxPriorityPerStream    = 100
	maxWindowUpdatesPerData = 10
)

// Config configures a connection. Zero fields take defaults.
type Config struct {
	// Handler serves each stream, on a goroutine of its own.
	Handler http.Handler
	// TLS is what Request.TLS is for a request whose :scheme is https
	// (nil for one whose :scheme is http).
	TLS *tls.ConnectionState
	// MaxConcurrentStreams is SETTINGS_MAX_CONCURRENT_STREAMS.
	MaxConcurrentStreams uint32
	// StreamWindow and ConnWindow are our receive windows: what a
	// request body may have buffered.
	StreamWindow, ConnWindow uint32
	// MaxHeaderListSize is SETTINGS_MAX_HEADER_LIST_SIZE: a request head
	// past it is answered 431.
	MaxHeaderListSize uint32
	// IdleTimeout, when > 0, shuts the connection down after that long
	// without an open stream.
	IdleTimeout time.Duration
	// PingInterval, when > 0, sends a PING after that long without a
	// frame; PingTimeout (default 15s) later without one, the connection
	// closes.
	PingInterval, PingTimeout time.Duration
	// Log gets what goes wrong in a handler (a panic).
	Log *slog.Logger
	// Park, when set, parks the connection while it is idle (park.go);
	// Handler must then be a Host.
	Park *Parking
}

// Conn is one downstream HTTP/2 connection.
type Conn struct {
	nc     *wbatch.Conn // reads (through to what it wraps) and batched writes
	cfg    Config
	fr     *wire.HeaderReader // reads; the reader goroutine's only; nil while parked
	dec    *hpack.Decoder     // fr's, kept while parked: the peer's dynamic table
	canon  wire.CanonCache
	remote string
	ctx    context.Context // every request's context's parent (Serve's)
	slot   http1.ParkSlot  // the parker's while parked (park.go)

	// wmu serializes writes: the HPACK encoder's state follows wire
	// order. Lock order: wmu before mu.
	wmu      sync.Mutex
	wr       *writer       // nil while parked
	encLimit uint32        // the peer's SETTINGS_HEADER_TABLE_SIZE, at most headerTableSize
	maxFrame atomic.Uint32 // the peer's SETTINGS_MAX_FRAME_SIZE; written under wmu

	// The fields under mu are in an order that leaves no padding: a
	// parked connection keeps them.
	mu sync.Mutex
	// sendCond is signalled when send windows grew, a stream ended, or
	// the connection closed; the first wait makes it (waitSendLocked), so
	// that a connection whose writers never waited, as a parked one, does
	// not keep one.
	sendCond        *sync.Cond
	streams         map[uint32]*stream
	opened          int // streams opened
	unackedSettings int
	idleSince       time.Duration // when the last stream ended, on the monotonic clock (monoNow)
	priorities      int           // PRIORITY frames received
	windowUpdates   int           // WINDOW_UPDATE frames received
	dataSent        int           // DATA frames sent
	lastRead        atomic.Uint64
	idleTimer       *time.Timer
	pingTimer       *time.Timer
	drainTimer      *time.Timer
	maxClientID     uint32          // the highest stream id the client opened
	connSendWin     wire.SendWindow // what we may still send the peer
	connWin         wire.RecvWindow // what the peer may still send us, and what we owe it back
	peerInitWin     int32
	goAwayID        uint32 // the final GOAWAY's last stream id
	shutdown        bool   // graceful shutdown started
	started         bool   // our SETTINGS went out: GOAWAY may follow
	goAwayFinal     bool   // the final GOAWAY was sent
	closing         bool   // the reader is ending: writes fail
	parked          bool   // from the reader's decision to park until the socket is attached again (park.go)
	wakeWanted      bool   // a write waits for a parked connection to wake
	ended           bool   // the Host's Ended was called (Parking)
}

// monoEpoch is where monoNow counts from: a time with a monotonic reading,
// so that the durations since it, and the times made from them, follow the
// monotonic clock as time.Now's do.
var monoEpoch = time.Now()

// monoNow is the time since monoEpoch (a time.Duration is 8 bytes of a
// parked connection where a time.Time is 24).
func monoNow() time.Duration { return time.Since(monoEpoch) }

// waitSendLocked waits for a wakeSendersLocked (mu held).
func (c *Conn) waitSendLocked() {
	if c.sendCond == nil {
		c.sendCond = sync.NewCond(&c.mu)
	}
	c.sendCond.Wait()
}

// wakeSendersLocked wakes whoever waits in waitSendLocked (mu held).
func (c *Conn) wakeSendersLocked() {
	if c.sendCond != nil {
		c.sendCond.Broadcast()
	}
}

// writer is what writing frames takes (wmu held): a parked connection
// drops it (park.go).
type writer struct {
	wbuf    bytes.Buffer
	wfr     *http2.Framer // writes into wbuf
	hbuf    bytes.Buffer
	henc    *hpack.Encoder
	lowered wire.LowerCache
	dateSec int64
	date    string
}

// newWriter makes a writer whose encoder's dynamic table may hold up to
// limit bytes; reset: the table starts empty where the peer's copy may not
// be, and the first header block says so.
func newWriter(limit uint32, reset bool) *writer {
	w := &writer{}
	w.wfr = http2.NewFramer(&w.wbuf, nil)
	w.henc = hpack.NewEncoder(&w.hbuf)
	if reset {
		w.henc.SetMaxDynamicTableSizeLimit(limit)
		w.henc.SetMaxDynamicTableSize(0)
		w.henc.SetMaxDynamicTableSize(limit)
	}
	return w
}

// errConnClosed fails what waits on a connection that ended.
var errConnClosed = errors.New("http2 server: connection closed")

// New prepares the HTTP/2 connection over nc (whose client preface has
// not been read yet); Serve serves it.
func New(nc *wbatch.Conn, cfg Config) *Conn {
	c := &Conn{}
	c.Init(nc, cfg)
	return c
}

// Init prepares c, a zero Conn (one a larger struct holds, so that a
// connection's state is one allocation), as New does.
func (c *Conn) Init(nc *wbatch.Conn, cfg Config) {
	if cfg.MaxConcurrentStreams == 0 {
		cfg.MaxConcurrentStreams = defaultMaxStreams
	}
	if cfg.StreamWindow == 0 {
		cfg.StreamWindow = defaultStreamWindow
	}
	if cfg.ConnWindow == 0 {
		cfg.ConnWindow = defaultConnWindow
	}
	cfg.StreamWindow = wire.StreamWindowSize(cfg.StreamWindow)
	cfg.ConnWindow = wire.ConnWindowSize(cfg.ConnWindow)
	if cfg.MaxHeaderListSize == 0 {
		cfg.MaxHeaderListSize = defaultHeaderList
	}
	if cfg.PingTimeout == 0 {
		cfg.PingTimeout = defaultPingTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if _, ok := cfg.Handler.(Host); cfg.Park != nil && !ok {
		panic("http2 server: Config.Park is set and Config.Handler is not a Host")
	}
	c.nc, c.cfg = nc, cfg
	c.encLimit = headerTableSize
	c.connSendWin = wire.NewSendWindow(wire.InitialWindow)
	c.connWin = wire.NewRecvWindow(cfg.ConnWindow, cfg.ConnWindow/4)
	c.peerInitWin = wire.InitialWindow
	c.idleSince = monoNow()
	if ra := nc.RemoteAddr(); ra != nil {
		c.remote = ra.String()
	}
	c.maxFrame.Store(defaultMaxFrameSize)
	c.dec = hpack.NewDecoder(headerTableSize, nil)
	c.newReader()
	c.wr = newWriter(headerTableSize, false)
}

// newReader makes the reader's framer, on the connection's HPACK decoder.
func (c *Conn) newReader() {
	fr := http2.NewFramer(nil, c.nc)
	fr.SetReuseFrames()
	c.fr = wire.NewHeaderReader(fr, c.dec, c.cfg.MaxHeaderListSize)
}

// Serve reads the client preface and serves the connection until it
// ends, closing nc, or parks (Config.Park: the Host's Ended tells when
// it ends then). ctx is every request's context's parent.
func (c *Conn) Serve(ctx context.Context) {
	c.ctx = ctx
	defer c.recoverPanic()
	var pre [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(c.nc, pre[:]); err != nil || string(pre[:]) != http2.ClientPreface {
		c.end()
		return
	}
	err := c.writeControl(func(fr *http2.Framer) error {
		_ = fr.WriteSettings(
			http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.cfg.MaxConcurrentStreams},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: c.cfg.StreamWindow},
			http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.cfg.MaxHeaderListSize},
		)
		return wire.WriteWindowUpdates(fr, c.cfg.ConnWindow-wire.InitialWindow, 0, 0)
	})
	c.mu.Lock()
	c.unackedSettings++
	c.started = true
	pending := c.shutdown // Shutdown came before our SETTINGS went out
	c.mu.Unlock()
	if err != nil {
		c.end()
		return
	}
	if pending {
		c.sendShutdown()
	}
	c.mu.Lock()
	if c.cfg.IdleTimeout > 0 {
		c.idleTimer = time.AfterFunc(c.cfg.IdleTimeout, c.idleCheck)
	}
	if c.cfg.PingInterval > 0 {
		c.pingTimer = time.AfterFunc(c.cfg.PingInterval, c.keepalive(wire.Keepalive{}))
	}
	c.mu.Unlock()
	c.run(true)
}

// run reads frames until the connection ends (and then ends it) or parks.
// first: the peer's first frame is still to come.
func (c *Conn) run(first bool) {
	if !c.readLoop(first) {
		c.end()
	}
}

// end ends the connection: its streams, its timers, nc, and then
// the Host's Ended (once; Parking).
func (c *Conn) end() {
	c.finish()
	_ = c.nc.Close()
	c.mu.Lock()
	ended := c.ended
	c.ended = true
	c.wakeSendersLocked()
	c.mu.Unlock()
	if !ended && c.cfg.Park != nil {
		c.host().Ended()
	}
}

// recoverPanic ends the connection after a bug on its reader goroutine:
// it costs the connection, not the proxy.
func (c *Conn) recoverPanic() {
	if v := recover(); v != nil {
		c.cfg.Log.Error("panic serving HTTP/2 connection", "remote", c.remote, "panic", v, "stack", string(debug.Stack()))
		c.end()
	}
}

// readLoop reads and processes frames until the connection fails or ends
// (false) or parks (true: it is the parker's, or another goroutine's).
func (c *Conn) readLoop(first bool) (parked bool) {
	ctx := c.ctx
	if !first && c.cfg.Park != nil {
		c.mu.Lock()
		c.armIdleLocked() // resumed: park again unless a frame comes
		c.mu.Unlock()
	}
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			if c.cfg.Park != nil && c.cfg.Park.Socket.IsIdle(err) {
				// Between frames, nothing read: park, or wait on.
				if c.tryPark() {
					return true
				}
				if c.closeWhenIdle() {
					return false
				}
				continue
			}
			var se http2.StreamError
			if errors.As(err, &se) {
				// A HEADERS block the framer refused (a malformed
				// field, pseudo-header order): that stream's error.
				c.noteStreamID(se.StreamID)
				c.resetStream(se.StreamID, se.Code)
				continue
			}
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				c.goAwayAndClose(http2.ErrCode(ce), err.Error())
				return false
			}
			// The read deadline set when the last stream of a shut-down
			// connection ended, or the peer gone.
			c.closeWhenIdle()
			return false
		}
		c.lastRead.Add(1)
		if first {
			if _, ok := f.(*http2.SettingsFrame); !ok {
				c.goAwayAndClose(http2.ErrCodeProtocol, "first frame is not SETTINGS")
				return false
			}
			first = false
		}
		if err := c.processFrame(ctx, f); err != nil {
			var ce http2.ConnectionError
			code := http2.ErrCodeInternal
			if errors.As(err, &ce) {
				code = http2.ErrCode(ce)
			}
			c.goAwayAndClose(code, err.Error())
			return false
		}
		if c.closeWhenIdle() {
			return false
		}
	}
}

// closeWhenIdle reports whether the connection, shut down and without a
// stream, may end: its last frames are flushed and the peer gets
// goAwayGrace to close first.
func (c *Conn) closeWhenIdle() bool {
	c.mu.Lock()
	done := c.goAwayFinal && len(c.streams) == 0
	if !done {
		c.armIdleLocked()
	}
	c.mu.Unlock()
	if !done {
		return false
	}
	// The last stream may have been forgotten as its END_STREAM was
	// about to be queued (forgetEnded, under wmu): once wmu is free, that
	// frame is queued, and CloseWrite sends what is queued.
	c.wmu.Lock()
	c.wmu.Unlock() //nolint:staticcheck // an empty critical section: a barrier
	c.linger()
	return true
}

// linger sends what is queued, shuts the write side and reads (and
// drops) until the peer closes or goAwayGrace passes.
func (c *Conn) linger() {
	_ = c.nc.CloseWrite()
	_ = c.nc.SetReadDeadline(time.Now().Add(goAwayGrace))
	var buf [512]byte
	for {
		if _, err := c.nc.Read(buf[:]); err != nil {
			return
		}
	}
}

// finish ends every stream left and stops the timers.
func (c *Conn) finish() {
	c.mu.Lock()
	c.closing = true
	for id, s := range c.streams {
		s.failLocked(errConnClosed)
		delete(c.streams, id)
	}
	for _, t := range []*time.Timer{c.idleTimer, c.pingTimer, c.drainTimer} {
		if t != nil {
			t.Stop()
		}
	}
	c.wakeSendersLocked()
	c.mu.Unlock()
	c.nc.Wake()
}

// writeControl writes frames that must not wait for the peer (the
// reader's answers, resets, GOAWAY): queued without blocking; a peer that
// lets them pile up fails the connection.
func (c *Conn) writeControl(fn func(fr *http2.Framer) error) error {
	if !c.lockWriter() {
		return net.ErrClosed
	}
	defer c.wmu.Unlock()
	err := fn(c.wr.wfr)
	if err == nil {
		err = c.appendLocked()
	}
	c.wr.wbuf.Reset()
	if errors.Is(err, wbatch.ErrBacklog) {
		c.nc.Close()
	}
	return err
}

// lockWriter takes wmu with the connection's writer in place: a timer's
// write (a keepalive PING) that woke the connection may find it parked
// again by the time it holds wmu (the reader parks a connection with no
// stream and nothing queued, dropping its writer), or not yet have its
// socket back, and wakes it again (or waits for it);
// false: the connection ended.
func (c *Conn) lockWriter() bool {
	for {
		c.wmu.Lock()
		c.mu.Lock() // wmu before mu
		ready := c.wr != nil && !c.parked
		c.mu.Unlock()
		if ready {
			return true
		}
		c.wmu.Unlock()
		if !c.wake() {
			return false
		}
	}
}

// appendLocked queues wbuf (wmu held).
func (c *Conn) appendLocked() error {
	if c.wr.wbuf.Len() == 0 {
		return nil
	}
	err := c.nc.Append(c.wr.wbuf.Bytes())
	c.wr.wbuf.Reset()
	return err
}

// lockForData takes wmu once the write queue has room, so that a handler
// never holds wmu while it waits for the peer; it reports false when stop
// said so or the connection failed.
func (c *Conn) lockForData(stop func() bool) bool {
	for {
		if !c.nc.WaitRoom(stop) {
			return false
		}
		c.wmu.Lock()
		if c.nc.HasRoom() {
			return true
		}
		c.wmu.Unlock()
	}
}

// noteStreamID records id as opened by the client, for GOAWAY.
func (c *Conn) noteStreamID(id uint32) {
	c.mu.Lock()
	if id%2 == 1 && id > c.maxClientID {
		c.maxClientID = id
	}
	c.mu.Unlock()
}

// resetStream sends RST_STREAM for id and forgets its stream.
func (c *Conn) resetStream(id uint32, code http2.ErrCode) {
	c.mu.Lock()
	if s := c.streams[id]; s != nil {
		s.failLocked(http2.StreamError{StreamID: id, Code: code})
		c.removeLocked(s)
	}
	c.mu.Unlock()
	c.nc.Wake()
	_ = c.writeControl(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, code) })
}

// removeLocked forgets s (mu held).
func (c *Conn) removeLocked(s *stream) {
	if c.streams[s.id] == s {
		delete(c.streams, s.id)
		if len(c.streams) == 0 {
			c.idleSince = monoNow()
			if c.goAwayFinal {
				// The reader may be waiting on a silent peer.
				_ = c.nc.SetReadDeadline(time.Now())
			} else {
				c.armIdleLocked()
			}
		}
	}
	c.wakeSendersLocked()
}

// lookupLocked returns the stream of a frame for id (mu held); for an id
// the client never opened it returns a connection error, for a stream
// already gone nil.
func (c *Conn) lookupLocked(id uint32, what string) (*stream, error) {
	if s := c.streams[id]; s != nil {
		return s, nil
	}
	if id == 0 || id > c.maxClientID || id%2 == 0 {
		return nil, fmt.Errorf("%s on idle stream %d: %w", what, id, http2.ConnectionError(http2.ErrCodeProtocol))
	}
	return nil, nil
}

// dateHeader is the Date value for now, computed once a second (wmu
// held).
func (c *Conn) dateHeader() string {
	now := time.Now()
	if sec := now.Unix(); sec != c.wr.dateSec {
		c.wr.dateSec = sec
		c.wr.date = now.UTC().Format(http.TimeFormat)
	}
	return c.wr.date
}
