package peermeta

// Istio's TCP metadata exchange on one connection (exchange.go has the
// frame): on a connection whose TLS ALPN came out as
// istio-peer-exchange, each side sends its frame before any application
// byte and reads the peer's before passing the peer's bytes on. The client
// (an upstream connection of a cluster listing istio.metadata_exchange)
// sends at once; the server (a chain listing the network filter) sends
// when the client's first bytes arrive or before its first write,
// whichever comes first, as Istio's filter writes in onData and onWrite.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
)

// NegotiatedALPN is the protocol a TLS connection agreed on ("" for a
// plaintext one).
func NegotiatedALPN(c net.Conn) string {
	if tc, ok := c.(TLSConn); ok {
		return tc.ConnectionState().NegotiatedProtocol
	}
	return ""
}

// TLSConn is a connection that went through a TLS handshake (*tls.Conn,
// or a wrapper that embeds one).
type TLSConn interface {
	ConnectionState() tls.ConnectionState
}

// Conn wraps a connection that speaks the exchange: our frame goes out
// before the first byte written (or at once, Send), the peer's is taken
// off the front of what is read and handed to the OnPeer callback. Read
// may be called by one goroutine while another calls Write; OnPeer must be
// set before the first Read.
type Conn struct {
	net.Conn
	frame []byte // ours

	once    sync.Once
	sendErr error

	// Only touched by the reading goroutine.
	done    bool
	buf     []byte // bytes read while looking for the peer's frame
	pending []byte // application bytes read with the frame, not yet returned
	onPeer  func(id string, w *Workload)
}

// NewConn wraps c; frame is ours (AppendExchange).
func NewConn(c net.Conn, frame []byte) *Conn {
	return &Conn{Conn: c, frame: frame}
}

// OnPeer sets the callback told the peer's id and workload once its frame
// is read (nil workload: the peer sent none, or a bad one).
func (x *Conn) OnPeer(f func(id string, w *Workload)) { x.onPeer = f }

// Send writes our frame now (the client side sends first); later calls
// return the first's error.
func (x *Conn) Send() error { return x.send() }

// send writes our frame once.
func (x *Conn) send() error {
	x.once.Do(func() {
		if _, err := x.Conn.Write(x.frame); err != nil {
			x.sendErr = fmt.Errorf("send peer exchange: %w", err)
		}
	})
	return x.sendErr
}

func (x *Conn) Write(p []byte) (int, error) {
	if err := x.send(); err != nil {
		return 0, err
	}
	return x.Conn.Write(p)
}

// ErrBadExchange is a peer frame that is not one: the connection is closed,
// as the bytes after it cannot be trusted to be the application's.
var ErrBadExchange = errors.New("bad peer exchange")

func (x *Conn) Read(p []byte) (int, error) {
	if !x.done {
		if err := x.readFrame(); err != nil {
			return 0, err
		}
	}
	if len(x.pending) > 0 {
		n := copy(p, x.pending)
		x.pending = x.pending[n:]
		if len(x.pending) == 0 {
			x.pending, x.buf = nil, nil
		}
		return n, nil
	}
	return x.Conn.Read(p)
}

// readFrame reads until the peer's frame is whole, or the bytes show
// there is none (they are then the application's, passed on), and sends
// ours once the first bytes are in.
func (x *Conn) readFrame() error {
	var chunk [4096]byte
	for {
		n, err := x.Conn.Read(chunk[:])
		x.buf = append(x.buf, chunk[:n]...)
		if n > 0 {
			if serr := x.send(); serr != nil {
				return serr
			}
		}
		id, w, used, perr := ParseExchange(x.buf)
		switch {
		case perr == nil:
			x.finish(id, &w)
			x.pending = x.buf[used:]
			return nil
		case errors.Is(perr, ErrNoExchange):
			x.finish("", nil)
			x.pending = x.buf
			return nil
		case errors.Is(perr, ErrShort):
			if err != nil {
				// The peer went away in the middle of its frame.
				x.finish("", nil)
				return err
			}
		default:
			x.finish("", nil)
			return fmt.Errorf("%w: %w", ErrBadExchange, perr)
		}
	}
}

func (x *Conn) finish(id string, w *Workload) {
	x.done = true
	if x.onPeer != nil {
		x.onPeer(id, w)
	}
}

type closeWriter interface{ CloseWrite() error }

// CloseWrite half-closes the wrapped connection when it can, else closes
// it (PipeIdle's contract for a destination that ended).
func (x *Conn) CloseWrite() error {
	if err := x.send(); err != nil {
		return err
	}
	if cw, ok := x.Conn.(closeWriter); ok {
		return cw.CloseWrite()
	}
	return x.Conn.Close()
}

// NetConn returns the wrapped connection, so that code looking for the
// TLS layer (tlsconf.Layers) finds it.
func (x *Conn) NetConn() net.Conn { return x.Conn }
