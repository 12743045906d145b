package hcm

import (
	"net"
	"time"
)

// An idle HTTP/1.1 keep-alive connection is parked: after parkAfter without
// a new request its goroutine ends and its read buffer goes back to the
// pool, and the connection waits in the Server's parker (one epoll set and
// one goroutine for all of them, park_linux.go) until it becomes readable,
// its idle_timeout or max_connection_duration passes, its listener drains
// or the Server closes. A readable connection gets a new goroutine and a
// pooled buffer and reads its request as before. So ten thousand idle
// connections cost their sockets and small structs, not ten thousand
// goroutine stacks and read buffers (Envoy and nginx hold an idle
// connection the same way: an entry in an event loop).

// parkAfter is how long a connection waits for its next request on its own
// goroutine before parking: a client that sends requests back to back never
// parks, so the request path pays nothing for parking.
const parkAfter = 100 * time.Millisecond

// RawConn lets the parker and http1.Peek reach the socket once the sniffed
// bytes are consumed.
func (c *prefixConn) RawConn() net.Conn {
	if len(c.pre) > 0 {
		return nil
	}
	return c.Conn
}

// parkDeadline is when a parked connection must wake to close: its idle
// timeout counted from since, or max_connection_duration, whichever comes
// first; zero for never.
func (c *h1conn) parkDeadline(since time.Time) time.Time {
	var t time.Time
	if d := c.lim.IdleTimeout; d > 0 {
		t = since.Add(d)
	}
	if e := c.limits.expiry; !e.IsZero() && (t.IsZero() || e.Before(t)) {
		t = e
	}
	return t
}
