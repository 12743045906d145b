package hcm

// This file is the HTTP/1.1 path's access log: the record of the request
// in progress is filled where the path decides (the route and endpoint
// picked, the status line written, a local reply's flags) and logged when
// the request ends. A filter without access_log skips all of it but a few
// field stores.

import (
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/hcm/http1"
)

// logging reports whether requests of this connection are logged.
func (c *h1conn) logging() bool { return len(c.filter.AccessLog) > 0 }

// beginLog starts the record of a request that began at start.
func (c *h1conn) beginLog(start time.Time) {
	c.rec = accesslog.Record{Start: start}
	c.respBytes.Store(0)
}

// endLog completes the record from the request and logs it.
func (c *h1conn) endLog() {
	r := &c.rec
	req := &c.req
	r.Duration = time.Since(r.Start)
	if len(req.Method) > 0 {
		r.Method = http1.UnsafeString(req.Method)
		r.Path = http1.UnsafeString(req.Target)
		if len(req.Authority) > 0 { // absolute-form: the path and query alone
			r.Path = http1.UnsafeString(req.Path) + http1.UnsafeString(req.Query)
		}
		r.Authority = http1.UnsafeString(req.Host)
		r.Request = &req.Headers
		r.Protocol = "HTTP/1.1"
		if req.Minor == 0 {
			r.Protocol = "HTTP/1.0"
		}
		if req.Framing == http1.FramingLength {
			r.BytesReceived = req.ContentLength
		}
	}
	r.BytesSent += c.respBytes.Load()
	if r.Details == "" && r.Code != 0 {
		r.Details = accesslog.DetailsFor(r.Flags)
	}
	r.DownstreamLocal = c.dst
	r.DownstreamRemote = c.remoteAddr()
	c.filter.AccessLog.Log(r)
	c.rec = accesslog.Record{} // drop the references to the buffers
}

// remoteAddr is the downstream peer's address, computed once.
func (c *h1conn) remoteAddr() netip.AddrPort {
	if !c.remote.IsValid() {
		c.remote = addrPortOf(c.tracked.RemoteAddr())
	}
	return c.remote
}

func addrPortOf(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort()
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}

// streamLog records an HTTP/2 (or net/http codec) stream's response for
// the access log: status and body bytes, as written through it.
type streamLog struct {
	http.ResponseWriter
	rec accesslog.Record
}

func (sl *streamLog) WriteHeader(code int) {
	if sl.rec.Code == 0 && code >= 200 {
		sl.rec.Code = code
	}
	sl.ResponseWriter.WriteHeader(code)
}

func (sl *streamLog) Write(b []byte) (int, error) {
	if sl.rec.Code == 0 {
		sl.rec.Code = http.StatusOK
	}
	n, err := sl.ResponseWriter.Write(b)
	sl.rec.BytesSent += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the stream's Flush.
func (sl *streamLog) Unwrap() http.ResponseWriter { return sl.ResponseWriter }

// Flush sends what was written (http.Flusher, for gRPC streams).
func (sl *streamLog) Flush() { _ = http.NewResponseController(sl.ResponseWriter).Flush() }

// startStreamLog wraps w when the stream is logged; the returned function
// logs it (call it when the handler returns).
func startStreamLog(w http.ResponseWriter, r *http.Request, c *conn) (http.ResponseWriter, *accesslog.Record, func()) {
	sl := &streamLog{ResponseWriter: w, rec: accesslog.Record{Start: time.Now()}}
	body := &countingBody{ReadCloser: r.Body}
	r.Body = body
	return sl, &sl.rec, func() {
		rec := &sl.rec
		rec.Duration = time.Since(rec.Start)
		rec.Protocol = "HTTP/2"
		if r.ProtoMajor == 1 {
			rec.Protocol = r.Proto
		}
		rec.Method, rec.Authority = r.Method, r.Host
		rec.Path = r.URL.RequestURI()
		rec.Request, rec.Response = accesslog.HTTPHeader(r.Header), accesslog.HTTPHeader(sl.Header())
		rec.Flags = sl.Header().Get("X-Strait-Response-Flags")
		rec.BytesReceived = body.n
		if rec.Code != 0 {
			rec.Details = accesslog.DetailsFor(rec.Flags)
		}
		rec.DownstreamLocal = c.dst
		rec.DownstreamRemote, _ = netip.ParseAddrPort(r.RemoteAddr)
		c.filter.AccessLog.Log(rec)
	}
}

// countingBody counts a request body's bytes as the handler reads them.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}
