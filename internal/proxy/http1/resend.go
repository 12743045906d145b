package http1

// This file holds what both HTTP/1.1 upstream paths (forward/h1 for
// HTTP/1.1 streams, cluster's round trip for HTTP/2 streams and mirrors)
// ask before they send a request again on a new connection, after a
// pooled one failed under it.

import (
	"errors"
	"io"
	"net"
)

// Idempotent reports whether a request with method m may be sent twice
// (RFC 9110 §9.2.2): what both HTTP/1.1 upstream paths ask before they
// send a request again on a new connection.
func Idempotent(m string) bool {
	switch m {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	return false
}

// ErrNoResponse is the error of an exchange whose upstream closed the
// connection before any byte of a response.
var ErrNoResponse = errors.New("upstream closed the connection before a response")

// StaleConn reports whether err, a failure before any response byte,
// looks like the upstream having closed a pooled connection while it was
// idle (a close, a reset, a broken pipe): the failure a request may be
// sent again for, on a new connection, when that is safe. A timeout is
// not one.
func StaleConn(err error) bool {
	var ne *net.OpError
	return errors.Is(err, ErrNoResponse) || errors.Is(err, io.EOF) || errors.As(err, &ne) && !ne.Timeout()
}
