package wire

// RecvWindow is a receive flow-control window (RFC 9113 §5.2) of one
// connection or stream: what the peer may still send, and what was
// consumed but not yet given back. It is not safe for concurrent use: the
// connection's lock guards it.
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
