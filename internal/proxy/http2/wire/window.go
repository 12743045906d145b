package wire

// Flow control (RFC 9113 §5.2, §6.9) as both ends keep it: the windows
// the peer gave us (SendWindow) and the ones we gave the peer
// (RecvWindow), for the connection and for each stream. None of them is
// safe for concurrent use: the connection's lock guards them.

import (
	"fmt"

	"golang.org/x/net/http2"
)

// Window sizes of RFC 9113 §6.9.
const (
	// InitialWindow is every window's size until SETTINGS or
	// WINDOW_UPDATE say otherwise (and the connection window's for good).
	InitialWindow = 65535
	// MaxWindow is the largest a window may grow; past it is a
	// FLOW_CONTROL_ERROR.
	MaxWindow = 1<<31 - 1
)

// The flow-control errors of a connection: each ends it with GOAWAY
// FLOW_CONTROL_ERROR (errors.As finds the http2.ConnectionError).
var (
	ErrConnWindowOverflow    = fmt.Errorf("WINDOW_UPDATE overflows the connection window: %w", http2.ConnectionError(http2.ErrCodeFlowControl))
	ErrDataPastConnWindow    = fmt.Errorf("DATA past the connection window: %w", http2.ConnectionError(http2.ErrCodeFlowControl))
	ErrInitialWindowOverflow = fmt.Errorf("SETTINGS_INITIAL_WINDOW_SIZE overflows a window: %w", http2.ConnectionError(http2.ErrCodeFlowControl))
)

// StreamWindowSize is the receive window a stream may be given for a
// configured size n: at most MaxWindow.
func StreamWindowSize(n uint32) uint32 { return min(n, MaxWindow) }

// ConnWindowSize is the receive window a connection may be given for a
// configured size n: at least InitialWindow (a connection window only
// grows from it, with a WINDOW_UPDATE after the preface) and at most
// MaxWindow.
func ConnWindowSize(n uint32) uint32 { return min(max(n, InitialWindow), MaxWindow) }

// RecvWindow is a receive flow-control window of one connection or
// stream: what the peer may still send, and what was consumed but not yet
// given back.
type RecvWindow struct {
	avail     int32
	unacked   uint32
	threshold uint32
}

// maxUnacked bounds what is held back before a WINDOW_UPDATE whatever the
// threshold: a large window is given back at least every MiB.
const maxUnacked = 1 << 20

// NewRecvWindow is a window of size bytes whose consumed bytes are given
// back once at least threshold of them (or a MiB) have gathered.
func NewRecvWindow(size, threshold uint32) RecvWindow {
	return RecvWindow{avail: int32(size), threshold: threshold}
}

// Take counts n received bytes (DATA with its padding) against the
// window; false means the peer sent past it (FLOW_CONTROL_ERROR), and
// nothing is counted.
func (w *RecvWindow) Take(n uint32) bool {
	if int64(n) > int64(w.avail) {
		return false
	}
	w.avail -= int32(n)
	return true
}

// Hold counts n bytes as consumed without an update now: they go back
// with the next one Return sends (a stream's DATA padding).
func (w *RecvWindow) Hold(n uint32) { w.unacked += n }

// Return gives n consumed bytes back and returns the WINDOW_UPDATE
// increment to send now: 0 until the threshold (or a MiB) has gathered,
// then all that gathered, which the window has again.
func (w *RecvWindow) Return(n uint32) uint32 {
	w.unacked += n
	if w.unacked < w.threshold && w.unacked < maxUnacked {
		return 0
	}
	inc := w.unacked
	w.unacked = 0
	w.avail += int32(inc)
	return inc
}

// Avail is what the peer may still send.
func (w *RecvWindow) Avail() int32 { return w.avail }

// SendWindow is a send flow-control window of one connection or stream:
// what the peer lets us send. It may be negative, after the peer lowered
// SETTINGS_INITIAL_WINDOW_SIZE (RFC 9113 §6.9.2).
type SendWindow struct {
	avail int32
}

// NewSendWindow is a window of size bytes (InitialWindow, or the peer's
// SETTINGS_INITIAL_WINDOW_SIZE for a stream).
func NewSendWindow(size int32) SendWindow { return SendWindow{avail: size} }

// Grow adds a WINDOW_UPDATE's increment; false means the window would
// pass MaxWindow (FLOW_CONTROL_ERROR), and nothing is added.
func (w *SendWindow) Grow(inc uint32) bool {
	return w.Shift(int64(inc))
}

// Shift moves the window by delta, the change of the peer's
// SETTINGS_INITIAL_WINDOW_SIZE; false means it would pass MaxWindow, and
// it is not moved.
func (w *SendWindow) Shift(delta int64) bool {
	n := int64(w.avail) + delta
	if n > MaxWindow {
		return false
	}
	w.avail = int32(n)
	return true
}

// Avail is what may be sent now (<= 0: nothing).
func (w *SendWindow) Avail() int32 { return w.avail }

// Spend counts n bytes sent; n is at most Avail.
func (w *SendWindow) Spend(n int32) { w.avail -= n }

// SpendData takes what may be sent of n bytes of DATA on a stream: at
// most n, limit (the peer's SETTINGS_MAX_FRAME_SIZE) and what both the
// stream's and the connection's windows allow, spent from both; 0 when
// either window is closed.
func SpendData(stream, conn *SendWindow, n, limit int) int {
	k := max(min(n, limit, int(stream.avail), int(conn.avail)), 0)
	stream.avail -= int32(k)
	conn.avail -= int32(k)
	return k
}

// ShiftSendWindows applies the peer's new SETTINGS_INITIAL_WINDOW_SIZE
// to every open stream's send window (win returns a stream's), moving
// each by the change from old; a window that would pass MaxWindow fails
// the connection with ErrInitialWindowOverflow (RFC 9113 §6.9.2).
func ShiftSendWindows[S any](streams map[uint32]S, win func(S) *SendWindow, old, size uint32) error {
	delta := int64(size) - int64(old)
	for _, s := range streams {
		if !win(s).Shift(delta) {
			return ErrInitialWindowOverflow
		}
	}
	return nil
}

// WriteWindowUpdates writes the WINDOW_UPDATEs for increments connInc
// (the connection's) and streamInc (stream id's), leaving out a zero one.
func WriteWindowUpdates(fr *http2.Framer, connInc, id, streamInc uint32) error {
	var err error
	if connInc > 0 {
		err = fr.WriteWindowUpdate(0, connInc)
	}
	if streamInc > 0 && err == nil {
		err = fr.WriteWindowUpdate(id, streamInc)
	}
	return err
}
