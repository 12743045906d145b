package wire

// Keepalive PINGs (x/net/http2's ReadIdleTimeout and PingTimeout), the
// payloads of the PINGs both ends send, and the idle timeout.

import (
	"time"

	"golang.org/x/net/http2"
)

// PING payloads: which of our PINGs an ACK answers.
var (
	// KeepalivePingData is a keepalive's PING.
	KeepalivePingData = [8]byte{'s', 't', 'r', 'a', 'i', 't'}
	// DrainPingData follows the first GOAWAY of a graceful shutdown: its ACK
	// says the peer saw that GOAWAY (RFC 9113 §6.8).
	DrainPingData = [8]byte{'g', 'o', 'a', 'w', 'a', 'y'}
)

// Acks reports whether f is the ACK of our PING with payload data.
func Acks(f *http2.PingFrame, data [8]byte) bool {
	return f.IsAck() && f.Data == data
}

// Keepalive is where a connection's keepalive stands between two of its
// checks: the frames read by the last check, and whether that check sent
// a PING. A check runs on a timer and hands the next one its state (the
// connection keeps no copy of it): a frame of any kind is a sign of
// life, an ACK included.
type Keepalive struct {
	seen    uint64
	pingOut bool
}

// KeepaliveStep is what a keepalive check decided.
type KeepaliveStep uint8

const (
	// KeepaliveWait is for frames that arrived since the last check:
	// check again after the interval.
	KeepaliveWait KeepaliveStep = iota
	// KeepalivePing is for no frame in an interval: send a PING and
	// check again after the ping timeout.
	KeepalivePing
	// KeepaliveClose is for no frame within the ping timeout either:
	// the connection is dead.
	KeepaliveClose
)

// Check is a check that finds read frames read since the connection
// began: what to do, how long until the next check (interval or
// timeout; 0 for KeepaliveClose), and that check's state.
func (k Keepalive) Check(read uint64, interval, timeout time.Duration) (KeepaliveStep, time.Duration, Keepalive) {
	if read != k.seen {
		return KeepaliveWait, interval, Keepalive{seen: read}
	}
	if k.pingOut {
		return KeepaliveClose, 0, k
	}
	return KeepalivePing, timeout, Keepalive{seen: read, pingOut: true}
}

// IdleWait is an idle timeout's check on a connection that is busy (a
// stream open) or has had none for idleFor: how long until the next
// check, timeout while busy, what is left of it while idle; 0 once the
// connection has been idle for timeout (it ends).
func IdleWait(busy bool, idleFor, timeout time.Duration) time.Duration {
	if busy {
		return timeout
	}
	return max(timeout-idleFor, 0)
}
