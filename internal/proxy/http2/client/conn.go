// Package client is the proxy's upstream HTTP/2 connection, framed on
// x/net/http2's Framer and hpack: one reader goroutine per connection,
// streams as small structs that the reader hands frames to (no goroutine
// or channel per stream, except one to send a request body), and writes
// coalesced under one lock into one buffer that goes to the socket in one
// write (package wbatch batches further across goroutines).
//
// It replaces x/net/http2's Transport on the hot path, which costs a
// goroutine, several channels, a timer and two flushes per request, and
// re-indexes every unique header value (x-request-id) in its HPACK table.
// What it keeps of the protocol:
//
//   - SETTINGS (ours: no push, the receive windows, the header list size;
//     the peer's: MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE,
//     MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE, HEADER_TABLE_SIZE) and its ACK.
//   - Flow control both ways: send windows per stream and connection,
//     WINDOW_UPDATE for what the caller has read; a peer that overflows a
//     window ends that stream or the connection (FLOW_CONTROL_ERROR).
//   - PING (answered; with PingInterval, sent after a silent interval and
//     the connection closed if nothing arrives within PingTimeout).
//   - GOAWAY: no new stream; streams above its last-stream-id fail (they
//     were sent, and are never replayed here: the router's retry policy
//     decides), the others finish; a request not yet sent fails with
//     ErrConnUnusable, which the pool may send elsewhere.
//   - RST_STREAM both ways, trailers, END_STREAM, content-length checked.
//
// A frame for a stream the client never opened ends the connection
// (PROTOCOL_ERROR); a response head past our header list size ends its
// stream (the framer's HPACK decoder ends the connection with
// COMPRESSION_ERROR when a single field is longer than the whole limit);
// a malformed response ends its stream. Never another stream: frames are
// looked up by stream id in the connection's map, and a response goes
// only to the stream whose id it carries.
package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/straitmesh/strait/internal/proxy/http2/wire"
)

// Defaults for a zero Config field.
const (
	defaultStreamWindow  = 4 << 20
	defaultConnWindow    = 1 << 30
	defaultHeaderList    = 1 << 20
	defaultMaxStreams    = 100 // until the peer's SETTINGS say otherwise
	maxStreamID          = 1<<31 - 1
	defaultMaxFrameSize  = 16 << 10
	wbufFlushThreshold   = 32 << 10
	headerTableSizeLimit = 4096
)

// Config configures a connection. Zero fields take defaults.
type Config struct {
	// StreamWindow and ConnWindow are our receive windows.
	StreamWindow, ConnWindow uint32
	// MaxHeaderListSize is our SETTINGS_MAX_HEADER_LIST_SIZE: a response
	// head (or trailers) past it fails its stream.
	MaxHeaderListSize uint32
	// PingInterval, when > 0, sends a PING after that long without a
	// frame; PingTimeout (default 15s) later without one, the connection
	// closes.
	PingInterval, PingTimeout time.Duration
	// IdleTimeout, when > 0, closes the connection after that long
	// without a stream.
	IdleTimeout time.Duration
	// OnUnusable, if set, is called once when the connection can take no
	// new stream (GOAWAY received, closed, or Shutdown).
	OnUnusable func(*Conn)
}

// ErrConnUnusable is returned by RoundTrip for a request that was never
// sent because the connection can take no new stream (GOAWAY, closed, at
// its stream limit): the request may be sent on another connection.
var ErrConnUnusable = errors.New("http2 client: connection unusable, request not sent")

// ErrHeaderListTooLarge fails a stream whose response head or trailers
// were past our SETTINGS_MAX_HEADER_LIST_SIZE (its text is what
// cluster.IsResponseHeadTooLarge recognizes).
var ErrHeaderListTooLarge = errors.New("http2 client: response header list larger than advertised limit")

// GoAwayError fails a stream that was sent but that the peer's GOAWAY
// says it did not process (above LastStreamID), or every stream when the
// connection ends after a GOAWAY with an error.
type GoAwayError struct {
	LastStreamID uint32
	Code         http2.ErrCode
	Debug        string
}

func (e GoAwayError) Error() string {
	return fmt.Sprintf("http2 client: server sent GOAWAY (last stream %d, %v, %q)", e.LastStreamID, e.Code, e.Debug)
}

// Conn is one upstream HTTP/2 connection.
type Conn struct {
	nc  net.Conn
	cfg Config
	fr  *wire.HeaderReader // reads; the reader goroutine's only
	// canon maps lower-case field names to canonical ones (the reader
	// goroutine's only).
	canon wire.CanonCache

	// wmu serializes writes: the HPACK encoder's state must follow wire
	// order, and stream ids go out in increasing order. Lock order: wmu
	// before mu.
	wmu        sync.Mutex
	wbuf       bytes.Buffer
	wfr        *http2.Framer // writes into wbuf
	hbuf       bytes.Buffer
	henc       *hpack.Encoder
	werr       error           // sticky write error
	fields     []field         // requestFields' buffer
	lowered    wire.LowerCache // canonical → lower-case field names
	maxFrame   uint32
	peerMaxHdr uint32 // 0: no limit

	mu            sync.Mutex // guards what follows, and every stream's state
	sendCond      sync.Cond  // send windows grew, or a stream ended
	streams       map[uint32]*stream
	nextID        uint32
	reserved      int
	maxStreams    uint32
	peerInitWin   int32
	connSendWin   wire.SendWindow // what we may still send the peer
	connWin       wire.RecvWindow // what the peer may still send us, and what we owe it back
	goAway        *GoAwayError
	draining      bool // Shutdown: no new stream, close when idle
	closed        bool // the reader ended
	closing       bool // the socket is closed or closing
	closeErr      error
	unusableSent  bool
	idleSince     time.Time
	streamWin     uint32
	lastRead      atomic.Uint64 // frames read; the keepalive watches it
	readerDone    chan struct{}
	idleTimer     *time.Timer
	keepaliveTime *time.Timer
}

// New starts the HTTP/2 connection over nc: it writes the preface and our
// SETTINGS and starts the reader goroutine. nc is expected to batch
// writes (wbatch); each call of the connection writes at most once.
func New(nc net.Conn, cfg Config) (*Conn, error) {
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
		cfg.PingTimeout = 15 * time.Second
	}
	c := &Conn{
		nc:          nc,
		cfg:         cfg,
		streams:     map[uint32]*stream{},
		nextID:      1,
		maxStreams:  defaultMaxStreams,
		peerInitWin: wire.InitialWindow,
		connSendWin: wire.NewSendWindow(wire.InitialWindow),
		connWin:     wire.NewRecvWindow(cfg.ConnWindow, cfg.ConnWindow/2),
		streamWin:   cfg.StreamWindow,
		maxFrame:    defaultMaxFrameSize,
		readerDone:  make(chan struct{}),
		idleSince:   time.Now(),
	}
	c.sendCond.L = &c.mu
	fr := http2.NewFramer(nil, bufio.NewReaderSize(nc, 16<<10))
	fr.SetReuseFrames()
	c.fr = wire.NewHeaderReader(fr, hpack.NewDecoder(headerTableSizeLimit, nil), cfg.MaxHeaderListSize)
	c.wfr = http2.NewFramer(&c.wbuf, nil)
	c.henc = hpack.NewEncoder(&c.hbuf)

	c.wmu.Lock()
	c.wbuf.WriteString(http2.ClientPreface)
	_ = c.wfr.WriteSettings(
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: cfg.StreamWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: cfg.MaxHeaderListSize},
	)
	_ = wire.WriteWindowUpdates(c.wfr, cfg.ConnWindow-wire.InitialWindow, 0, 0)
	err := c.flushLocked()
	c.wmu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("http2 client: write preface: %w", err)
	}
	if cfg.IdleTimeout > 0 {
		c.idleTimer = time.AfterFunc(cfg.IdleTimeout, c.idleCheck)
	}
	if cfg.PingInterval > 0 {
		c.keepaliveTime = time.AfterFunc(cfg.PingInterval, c.keepalive(wire.Keepalive{}))
	}
	go c.readLoop()
	return c, nil
}

// flushLocked writes what wbuf holds (wmu held).
func (c *Conn) flushLocked() error {
	if c.werr != nil {
		c.wbuf.Reset()
		return c.werr
	}
	if c.wbuf.Len() == 0 {
		return nil
	}
	_, err := c.nc.Write(c.wbuf.Bytes())
	c.wbuf.Reset()
	if err != nil {
		c.werr = err
	}
	return err
}

// writeFrames runs fn (which writes frames with c.wfr) and sends them.
func (c *Conn) writeFrames(fn func(fr *http2.Framer) error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := fn(c.wfr); err != nil {
		c.wbuf.Reset()
		return err
	}
	return c.flushLocked()
}

// Reserve reserves a stream for a RoundTrip to come; it reports false
// when the connection can take no new stream. A RoundTrip takes the
// reservation; Release gives back one not used.
func (c *Conn) Reserve() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.usableLocked() || uint32(len(c.streams)+c.reserved) >= c.maxStreams {
		return false
	}
	c.reserved++
	return true
}

// Release gives back a reservation that no RoundTrip will take.
func (c *Conn) Release() {
	c.mu.Lock()
	if c.reserved > 0 {
		c.reserved--
	}
	c.becameIdleLocked()
	c.mu.Unlock()
}

func (c *Conn) usableLocked() bool {
	return !c.closed && !c.closing && c.goAway == nil && !c.draining && c.nextID <= maxStreamID
}

// Streams returns the streams open and reserved.
func (c *Conn) Streams() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.streams) + c.reserved
}

// Usable reports whether the connection may take a new stream.
func (c *Conn) Usable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.usableLocked()
}

// Shutdown takes no new stream and closes the connection once its
// streams are done.
func (c *Conn) Shutdown() {
	c.mu.Lock()
	c.draining = true
	idle := len(c.streams) == 0 && c.reserved == 0
	cb := c.unusableLocked()
	c.mu.Unlock()
	if cb != nil {
		cb(c)
	}
	if idle {
		c.Close()
	}
}

// unusableLocked returns OnUnusable the first time the connection becomes
// unusable (nil after), to call without mu.
func (c *Conn) unusableLocked() func(*Conn) {
	if c.unusableSent || c.usableLocked() {
		return nil
	}
	c.unusableSent = true
	return c.cfg.OnUnusable
}

// becameIdleLocked notes the connection idle, and closes it when it is
// draining (mu held; the close runs on its own goroutine).
func (c *Conn) becameIdleLocked() {
	if len(c.streams) != 0 || c.reserved != 0 {
		return
	}
	c.idleSince = time.Now()
	if (c.draining || c.goAway != nil) && !c.closed {
		go c.Close()
	}
}

func (c *Conn) idleCheck() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	busy := len(c.streams) != 0 || c.reserved != 0
	if wait := wire.IdleWait(busy, time.Since(c.idleSince), c.cfg.IdleTimeout); wait > 0 {
		c.idleTimer.Reset(wait)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.Close()
}

// keepalive returns the timer function of a keepalive check that starts
// from k (wire.Keepalive: a PING after PingInterval without a frame, the
// connection closed PingTimeout after it without one).
func (c *Conn) keepalive(k wire.Keepalive) func() {
	return func() {
		read := c.lastRead.Load()
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		step, wait, next := k.Check(read, c.cfg.PingInterval, c.cfg.PingTimeout)
		if step == wire.KeepaliveClose {
			c.mu.Unlock()
			c.closeWith(errors.New("http2 client: no frame within the ping timeout"))
			return
		}
		c.keepaliveTime = time.AfterFunc(wait, c.keepalive(next))
		c.mu.Unlock()
		if step == wire.KeepalivePing {
			_ = c.writeFrames(func(fr *http2.Framer) error { return fr.WritePing(false, wire.KeepalivePingData) })
		}
	}
}

// Close closes the connection; its streams fail.
func (c *Conn) Close() error {
	c.closeWith(errors.New("http2 client: connection closed"))
	<-c.readerDone
	return nil
}

// closeWith closes the socket; the reader fails the streams with err
// (unless an earlier error is recorded).
func (c *Conn) closeWith(err error) {
	c.mu.Lock()
	if c.closeErr == nil {
		c.closeErr = err
	}
	c.closing = true
	cb := c.unusableLocked()
	c.mu.Unlock()
	if cb != nil {
		cb(c)
	}
	c.nc.Close()
}

// connError sends GOAWAY with code and closes the connection. Its last
// stream id is 0: the server opens no stream (push is off).
func (c *Conn) connError(code http2.ErrCode, why string) {
	_ = c.writeFrames(func(fr *http2.Framer) error { return fr.WriteGoAway(0, code, []byte(why)) })
	c.closeWith(fmt.Errorf("http2 client: %s: %w", why, http2.ConnectionError(code)))
}

// readLoop reads frames until the connection fails, then fails every
// stream left.
func (c *Conn) readLoop() {
	defer close(c.readerDone)
	var err error
	for {
		var f http2.Frame
		f, err = c.fr.ReadFrame()
		if err != nil {
			break
		}
		c.lastRead.Add(1)
		if err = c.processFrame(f); err != nil {
			break
		}
	}
	var se http2.StreamError
	switch {
	case errors.As(err, &se):
		// The framer refuses a frame (bad padding, a frame too large for
		// its stream state) with a StreamError only for HEADERS it
		// cannot decode; treat anything the framer refuses as the
		// connection's error.
		c.connError(se.Code, "bad frame")
	case errors.As(err, new(http2.ConnectionError)):
		var ce http2.ConnectionError
		errors.As(err, &ce)
		c.connError(http2.ErrCode(ce), err.Error())
	}
	c.nc.Close()
	c.mu.Lock()
	c.closed = true
	if c.closeErr == nil {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		c.closeErr = fmt.Errorf("http2 client: connection lost: %w", err)
	}
	if ga := c.goAway; ga != nil && ga.Code != http2.ErrCodeNo {
		c.closeErr = *ga
	}
	fail := c.closeErr
	for id, s := range c.streams {
		s.failLocked(fail)
		delete(c.streams, id)
	}
	c.sendCond.Broadcast()
	cb := c.unusableLocked()
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	if c.keepaliveTime != nil {
		c.keepaliveTime.Stop()
	}
	c.mu.Unlock()
	if cb != nil {
		cb(c)
	}
}

func (c *Conn) processFrame(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		return c.onHeaders(f)
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.RSTStreamFrame:
		c.onReset(f)
	case *http2.SettingsFrame:
		return c.onSettings(f)
	case *http2.PingFrame:
		if !f.IsAck() {
			data := f.Data
			return c.writeFrames(func(fr *http2.Framer) error { return fr.WritePing(true, data) })
		}
		// An ACK is a frame read: the keepalive saw it (wire.Keepalive).
	case *http2.GoAwayFrame:
		c.onGoAway(f)
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.PushPromiseFrame:
		// We said SETTINGS_ENABLE_PUSH 0.
		return fmt.Errorf("PUSH_PROMISE with push disabled: %w", http2.ConnectionError(http2.ErrCodeProtocol))
	}
	// PRIORITY and unknown frame types are ignored.
	return nil
}

// lookup returns the stream of a frame for id (mu held); for an id the
// client never opened it returns a connection error, for a stream already
// gone nil.
func (c *Conn) lookupLocked(id uint32, what string) (*stream, error) {
	if s := c.streams[id]; s != nil {
		return s, nil
	}
	if id%2 == 0 || id >= c.nextID {
		return nil, fmt.Errorf("%s for stream %d the client never opened: %w", what, id, http2.ConnectionError(http2.ErrCodeProtocol))
	}
	return nil, nil
}

func (c *Conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	var tableSize uint32
	var hasTable bool
	c.mu.Lock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingMaxConcurrentStreams:
			c.maxStreams = s.Val
		case http2.SettingInitialWindowSize:
			if err := wire.ShiftSendWindows(c.streams, streamSendWindow, uint32(c.peerInitWin), s.Val); err != nil {
				return err
			}
			c.peerInitWin = int32(s.Val)
			c.sendCond.Broadcast()
		case http2.SettingHeaderTableSize:
			tableSize, hasTable = s.Val, true
		}
		return nil
	})
	c.mu.Unlock()
	if err != nil {
		return err
	}
	// Settings that the writer reads are applied under wmu, with the ACK,
	// so that every frame written after the ACK follows them.
	return c.writeFrames(func(fr *http2.Framer) error {
		_ = f.ForeachSetting(func(s http2.Setting) error {
			switch s.ID {
			case http2.SettingMaxFrameSize:
				c.maxFrame = s.Val
			case http2.SettingMaxHeaderListSize:
				c.peerMaxHdr = s.Val
			}
			return nil
		})
		if hasTable {
			c.henc.SetMaxDynamicTableSizeLimit(min(tableSize, headerTableSizeLimit))
		}
		return fr.WriteSettingsAck()
	})
}

func (c *Conn) onGoAway(f *http2.GoAwayFrame) {
	ga := &GoAwayError{LastStreamID: f.LastStreamID, Code: f.ErrCode, Debug: string(f.DebugData())}
	c.mu.Lock()
	if c.goAway == nil || ga.LastStreamID < c.goAway.LastStreamID {
		c.goAway = ga
	} else {
		c.goAway.Code, c.goAway.Debug = ga.Code, ga.Debug
	}
	last := c.goAway.LastStreamID
	for id, s := range c.streams {
		if id > last {
			// Sent, not processed: failed, not replayed.
			s.failLocked(*ga)
			delete(c.streams, id)
		}
	}
	c.sendCond.Broadcast()
	c.becameIdleLocked()
	cb := c.unusableLocked()
	c.mu.Unlock()
	if cb != nil {
		cb(c)
	}
}

func (c *Conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.StreamID == 0 {
		if !c.connSendWin.Grow(f.Increment) {
			return wire.ErrConnWindowOverflow
		}
		c.sendCond.Broadcast()
		return nil
	}
	s, err := c.lookupLocked(f.StreamID, "WINDOW_UPDATE")
	if s == nil {
		return err
	}
	if !s.sendWin.Grow(f.Increment) {
		c.resetLocked(s, http2.ErrCodeFlowControl, http2.StreamError{StreamID: s.id, Code: http2.ErrCodeFlowControl, Cause: errors.New("WINDOW_UPDATE overflows the stream window")})
		return nil
	}
	c.sendCond.Broadcast()
	return nil
}

func (c *Conn) onReset(f *http2.RSTStreamFrame) {
	c.mu.Lock()
	s := c.streams[f.StreamID]
	if s == nil {
		c.mu.Unlock()
		return // a stream already gone; an idle one is harmless to ignore
	}
	s.failLocked(http2.StreamError{StreamID: s.id, Code: f.ErrCode})
	c.removeLocked(s)
	c.mu.Unlock()
}

// removeLocked forgets s (mu held).
func (c *Conn) removeLocked(s *stream) {
	if c.streams[s.id] == s {
		delete(c.streams, s.id)
		c.sendCond.Broadcast()
		c.becameIdleLocked()
	}
}

// resetLocked fails s with err, forgets it and sends RST_STREAM with code
// (on its own goroutine: mu is held).
func (c *Conn) resetLocked(s *stream, code http2.ErrCode, err error) {
	s.failLocked(err)
	c.removeLocked(s)
	id := s.id
	go c.writeFrames(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, code) }) //nolint:errcheck // the connection fails on its own
}

// returnConnWindowLocked gives n bytes of connection window back to the
// peer, in WINDOW_UPDATEs of at least half the window (mu held); it
// returns the increment to send (0: none yet).
func (c *Conn) returnConnWindowLocked(n uint32) uint32 {
	return c.connWin.Return(n)
}

func (c *Conn) sendWindowUpdates(connInc uint32, id, streamInc uint32) {
	if connInc == 0 && streamInc == 0 {
		return
	}
	_ = c.writeFrames(func(fr *http2.Framer) error { return wire.WriteWindowUpdates(fr, connInc, id, streamInc) })
}

func (c *Conn) onData(f *http2.DataFrame) error {
	n := f.Length // with padding: all of it counts against the windows
	c.mu.Lock()
	if !c.connWin.Take(n) {
		c.mu.Unlock()
		return wire.ErrDataPastConnWindow
	}
	s, err := c.lookupLocked(f.StreamID, "DATA")
	if s == nil {
		inc := c.returnConnWindowLocked(n) // a stream gone: nobody reads it
		c.mu.Unlock()
		c.sendWindowUpdates(inc, 0, 0)
		return err
	}
	data := f.Data()
	pad := n - uint32(len(data))
	var connInc uint32
	switch {
	case s.resp == nil:
		connInc = c.returnConnWindowLocked(n)
		c.resetLocked(s, http2.ErrCodeProtocol, http2.StreamError{StreamID: s.id, Code: http2.ErrCodeProtocol, Cause: errors.New("DATA before the response head")})
	case s.recvDone:
		connInc = c.returnConnWindowLocked(n)
		c.resetLocked(s, http2.ErrCodeStreamClosed, http2.StreamError{StreamID: s.id, Code: http2.ErrCodeStreamClosed, Cause: errors.New("DATA after END_STREAM")})
	case s.noContent && len(data) > 0:
		connInc = c.returnConnWindowLocked(n)
		c.resetLocked(s, http2.ErrCodeProtocol, http2.StreamError{StreamID: s.id, Code: http2.ErrCodeProtocol, Cause: errors.New("DATA in a response without content")})
	case !s.recvWin.Take(n):
		connInc = c.returnConnWindowLocked(n)
		c.resetLocked(s, http2.ErrCodeFlowControl, http2.StreamError{StreamID: s.id, Code: http2.ErrCodeFlowControl, Cause: errors.New("DATA past the stream window")})
	default:
		s.received += int64(len(data))
		if s.resp.ContentLength >= 0 && s.received > s.resp.ContentLength {
			connInc = c.returnConnWindowLocked(n)
			c.resetLocked(s, http2.ErrCodeProtocol, http2.StreamError{StreamID: s.id, Code: http2.ErrCodeProtocol, Cause: errors.New("response body longer than its content-length")})
			break
		}
		if len(data) > 0 {
			if s.buf == nil {
				s.buf = wire.GetBodyBuf(len(data))
			}
			s.buf = append(s.buf, data...)
		}
		if pad > 0 {
			connInc = c.returnConnWindowLocked(pad)
			s.recvWin.Hold(pad)
		}
		if f.StreamEnded() {
			s.endRecvLocked()
		}
		s.cond.Broadcast()
	}
	c.mu.Unlock()
	c.sendWindowUpdates(connInc, 0, 0)
	return nil
}

// writeErr is the error a stream gets when the connection could not write.
func (c *Conn) writeErrLocked(err error) error {
	if c.closeErr != nil {
		return c.closeErr
	}
	return fmt.Errorf("http2 client: write: %w", err)
}

// streamSendWindow is s's send window, for wire.ShiftSendWindows.
func streamSendWindow(s *stream) *wire.SendWindow { return &s.sendWin }
