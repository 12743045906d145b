package server

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/straitmesh/strait/internal/proxy/http2/wire"
	"github.com/straitmesh/strait/internal/proxy/wbatch"
)

// pendMax is how much of a response body a Write keeps back before it
// sends: a small body goes out with the head and END_STREAM in one write
// when the handler returns (x/net/http2 keeps 4 KiB the same way).
const pendMax = 4 << 10

// pendBufs pools the kept-back bytes (array pointers: a Put allocates
// nothing).
var pendBufs = sync.Pool{New: func() any { return new([pendMax]byte) }}

// errStreamReset is what a handler's write returns once its stream is
// gone (reset by the client, or the connection closed).
var errStreamReset = errors.New("http2 server: stream reset or connection closed")

// responseWriter is a stream's http.ResponseWriter (and http.Flusher);
// only the handler's goroutine calls it.
type responseWriter struct {
	s      *stream
	req    *http.Request
	hdr    http.Header
	status int  // the final status; 0 before WriteHeader
	sent   bool // HEADERS went out
	done   bool // END_STREAM went out (or the stream failed)
	noBody bool // HEAD, 204, 304
	// headLen counts what a handler wrote in answer to HEAD: its
	// content-length when it wrote all before returning, as for GET.
	headLen int
	pend    []byte
	// trailers are the names announced in a Trailer header before the
	// head went out.
	trailers []string
}

func (w *responseWriter) Header() http.Header {
	if w.hdr == nil {
		w.hdr = http.Header{}
	}
	return w.hdr
}

// ResetHeader drops the response's header map before the response
// started: the next Header call makes a new one. A wrapper that hands the
// handler this writer's own map (hcm's stream guard) answers from another
// goroutine this way, while the handler may still write into the old map.
func (w *responseWriter) ResetHeader() { w.hdr = nil }

func (w *responseWriter) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	if code < 100 || code > 999 {
		panic("http2 server: invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code < 200 {
		if code != http.StatusSwitchingProtocols {
			w.writeInterim(code)
		}
		return
	}
	w.status = code
	w.noBody = w.req.Method == http.MethodHead || code == http.StatusNoContent || code == http.StatusNotModified
	for _, v := range w.hdr["Trailer"] {
		for _, k := range strings.Split(v, ",") {
			if k = textprotoTrim(k); k != "" {
				w.trailers = append(w.trailers, http.CanonicalHeaderKey(k))
			}
		}
	}
}

func textprotoTrim(s string) string { return strings.TrimSpace(s) }

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.done {
		return 0, errStreamReset
	}
	if w.noBody {
		if w.req.Method == http.MethodHead {
			w.headLen += len(p)
			return len(p), nil
		}
		return 0, http.ErrBodyNotAllowed
	}
	if len(w.pend)+len(p) <= pendMax {
		if w.pend == nil {
			w.pend = pendBufs.Get().(*[pendMax]byte)[:0]
		}
		w.pend = append(w.pend, p...)
		return len(p), nil
	}
	if err := w.send(p, false); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteString is Write without the copy of a conversion.
func (w *responseWriter) WriteString(s string) (int, error) {
	return w.Write([]byte(s))
}

// Flush sends what was written (http.Flusher).
func (w *responseWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush with its error (http.ResponseController).
func (w *responseWriter) FlushError() error {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.done {
		return errStreamReset
	}
	if w.sent && len(w.pend) == 0 {
		return nil
	}
	return w.send(nil, false)
}

// finish ends the response when the handler returned: the head if it did
// not go out (with a content-length when the whole body is known), the
// body kept back, then the trailers or END_STREAM.
func (w *responseWriter) finish() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.done {
		w.releasePend()
		return
	}
	_ = w.send(nil, true)
}

func (w *responseWriter) releasePend() {
	if cap(w.pend) == pendMax {
		pendBufs.Put((*[pendMax]byte)(w.pend[:pendMax]))
	}
	w.pend = nil
}

// trailerFields lists the trailers to send: the announced names with
// values, and the names set with http.TrailerPrefix.
// The names are lowered as they are written (c.wr.lowered, under wmu).
func (w *responseWriter) trailerFields() []field {
	n := 0
	for _, k := range w.trailers {
		n += len(w.hdr[k])
	}
	for k, vv := range w.hdr {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			n += len(vv)
		}
	}
	if n == 0 {
		return nil
	}
	tf := make([]field, 0, n)
	for _, k := range w.trailers {
		for _, v := range w.hdr[k] {
			tf = append(tf, field{k, v})
		}
	}
	for k, vv := range w.hdr {
		if !strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		name := k[len(http.TrailerPrefix):]
		for _, v := range vv {
			tf = append(tf, field{name, v})
		}
	}
	return tf
}

// field is a response header field ready to encode.
type field struct{ name, value string }

// send writes the head if it has not gone out, then the kept-back bytes
// and p, as the send windows allow; last ends the stream (with trailers
// if there are).
func (w *responseWriter) send(p []byte, last bool) error {
	s := w.s
	c := s.c
	var tf []field
	if last {
		tf = w.trailerFields()
	}
	stop := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return s.err != nil || c.closing
	}
	if stop() {
		return w.fail()
	}
	if !w.sent {
		if !c.lockForData(stop) {
			return w.fail()
		}
		endStream := last && len(w.pend) == 0 && len(p) == 0 && len(tf) == 0
		c.mu.Lock()
		s.headOut = true // under wmu: no 100 Continue after it
		c.mu.Unlock()
		c.wr.hbuf.Reset()
		w.encodeHead(last && len(tf) == 0)
		err := c.writeHeaderBlock(s.id, endStream)
		if err == nil {
			if endStream {
				c.forgetEnded(s)
			}
			err = c.appendLocked()
		}
		c.wmu.Unlock()
		if err != nil {
			return w.writeFailed(err)
		}
		w.sent = true
		if endStream {
			w.markDone()
			return nil
		}
	}
	if len(w.pend) > 0 {
		data := w.pend
		endStream := last && len(p) == 0 && len(tf) == 0
		err := w.sendData(data, endStream, stop)
		w.releasePend()
		if err != nil {
			return err
		}
		if endStream {
			w.markDone()
			return nil
		}
	}
	if len(p) > 0 || last && len(tf) == 0 {
		endStream := last && len(tf) == 0
		if err := w.sendData(p, endStream, stop); err != nil {
			return err
		}
		if endStream {
			w.markDone()
			return nil
		}
	}
	if last {
		if !c.lockForData(stop) {
			return w.fail()
		}
		c.wr.hbuf.Reset()
		for _, f := range tf {
			c.writeField(c.wr.lowered.Lower(f.name), f.value, false)
		}
		err := c.writeHeaderBlock(s.id, true)
		if err == nil {
			c.forgetEnded(s)
			err = c.appendLocked()
		}
		c.wmu.Unlock()
		if err != nil {
			return w.writeFailed(err)
		}
		w.markDone()
	}
	return nil
}

// forgetEnded forgets s, whose response's END_STREAM is about to be
// queued (wmu held), when its request has ended too: the stream is closed
// as soon as the client reads that frame (RFC 9113 §5.1), and a stream
// the client opens then must not find it still counted against
// SETTINGS_MAX_CONCURRENT_STREAMS and be refused. ended, afterwards, finds
// it gone.
func (c *Conn) forgetEnded(s *stream) {
	c.mu.Lock()
	if c.streams[s.id] == s && s.recvDone && s.err == nil {
		c.removeLocked(s)
	}
	c.mu.Unlock()
}

// sendData writes data in DATA frames as the windows allow; endStream
// ends the stream with the last one (an empty DATA frame if data is
// empty).
func (w *responseWriter) sendData(data []byte, endStream bool, stop func() bool) error {
	s := w.s
	c := s.c
	for len(data) > 0 || endStream {
		c.mu.Lock()
		for len(data) > 0 && s.err == nil && !c.closing && (s.sendWin.Avail() <= 0 || c.connSendWin.Avail() <= 0) {
			c.waitSendLocked()
		}
		if s.err != nil || c.closing {
			c.mu.Unlock()
			return w.fail()
		}
		k := wire.SpendData(&s.sendWin, &c.connSendWin, len(data), int(c.maxFrame.Load()))
		c.dataSent++
		c.mu.Unlock()
		if !c.lockForData(stop) {
			return w.fail()
		}
		last := endStream && k == len(data)
		err := c.wr.wfr.WriteData(s.id, last, data[:k])
		if err == nil {
			if last {
				c.forgetEnded(s)
			}
			err = c.appendLocked()
		}
		c.wr.wbuf.Reset()
		c.wmu.Unlock()
		if err != nil {
			return w.writeFailed(err)
		}
		data = data[k:]
		if last {
			return nil
		}
	}
	return nil
}

// Abort resets the stream (INTERNAL_ERROR, as after a handler's panic) from
// any goroutine: a Write blocked on the client's flow-control window
// returns an error. The handler's stream idle timeout uses it.
func (w *responseWriter) Abort() { w.s.abort() }

// fail marks the response over because the stream or connection went.
func (w *responseWriter) fail() error {
	w.done = true
	w.releasePend()
	return errStreamReset
}

// writeFailed ends the connection after a failed write.
func (w *responseWriter) writeFailed(err error) error {
	if errors.Is(err, wbatch.ErrBacklog) {
		w.s.c.nc.Close()
	}
	return w.fail()
}

// markDone notes END_STREAM sent.
func (w *responseWriter) markDone() {
	w.done = true
	w.releasePend()
	w.s.ended()
}

// writeInterim sends a 1xx head with the handler's header fields.
func (w *responseWriter) writeInterim(code int) {
	c := w.s.c
	stop := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return w.s.err != nil || c.closing
	}
	if w.sent || !c.lockForData(stop) {
		return
	}
	c.wr.hbuf.Reset()
	c.writeField(":status", strconv.Itoa(code), false)
	for k, vv := range w.hdr {
		w.writeHeaderField(k, vv)
	}
	err := c.writeHeaderBlock(w.s.id, false)
	if err == nil {
		err = c.appendLocked()
	}
	c.wmu.Unlock()
	if err != nil {
		_ = w.writeFailed(err)
	}
}

// writeContinue sends 100 Continue, for a request that expects it, at the
// first read of its body.
func (w *responseWriter) writeContinue() {
	s := w.s
	c := s.c
	_ = c.writeControl(func(fr *http2.Framer) error {
		// The request body may be read on another goroutine than the
		// handler's (an upstream transport's): the head's state is read
		// under wmu and mu, as send sets it.
		c.mu.Lock()
		skip := s.headOut || s.err != nil
		c.mu.Unlock()
		if skip {
			return nil
		}
		c.wr.hbuf.Reset()
		c.writeField(":status", "100", false)
		return c.writeHeaderBlock(w.s.id, false)
	})
}

// uniqueValued are response fields whose value is new on nearly every
// response: sent never-indexed, so that they don't churn the HPACK table.
var uniqueValued = map[string]bool{
	"date": true, "x-request-id": true, "content-length": true, "set-cookie": true,
	"x-envoy-upstream-service-time": true, "etag": true, "last-modified": true,
	"traceparent": true, "grpc-message": true,
}

// dropped are the fields HTTP/2 does not carry (RFC 9113 §8.2.2).
var dropped = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Transfer-Encoding": true, "Upgrade": true,
}

// encodeHead encodes the response head into c.wr.hbuf (wmu held); complete
// says the whole body is kept back (it gets a content-length if it has
// none).
func (w *responseWriter) encodeHead(complete bool) {
	c := w.s.c
	c.writeField(":status", statusText(w.status), false)
	_, hasDate := w.hdr["Date"]
	_, hasLen := w.hdr["Content-Length"]
	for k, vv := range w.hdr {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		w.writeHeaderField(k, vv)
	}
	if !hasDate {
		c.writeField("date", c.dateHeader(), false)
	}
	switch {
	case !complete || hasLen:
	case w.req.Method == http.MethodHead:
		if w.headLen > 0 {
			c.writeField("content-length", strconv.Itoa(w.headLen), false)
		}
	case !w.noBody:
		c.writeField("content-length", strconv.Itoa(len(w.pend)), false)
	}
}

// statusText is code's :status value, without an allocation for the
// common ones.
func statusText(code int) string {
	switch code {
	case http.StatusOK:
		return "200"
	case http.StatusNotFound:
		return "404"
	case http.StatusServiceUnavailable:
		return "503"
	}
	return strconv.Itoa(code)
}

// writeHeaderField encodes one field of the handler's header (wmu held);
// what HTTP/2 does not carry, and what is not a valid field, is dropped.
func (w *responseWriter) writeHeaderField(k string, vv []string) {
	c := w.s.c
	if dropped[k] {
		return
	}
	if w.noBody && k == "Content-Length" && w.req.Method != http.MethodHead {
		return
	}
	name := c.wr.lowered.Lower(k)
	if !httpguts.ValidHeaderFieldName(name) {
		return
	}
	for _, v := range vv {
		if !httpguts.ValidHeaderFieldValue(v) {
			continue
		}
		c.writeField(name, v, false)
	}
}

// writeField encodes one field into c.wr.hbuf (wmu held); sensitive ones
// (and those whose value is new on nearly every response) are not
// indexed.
func (c *Conn) writeField(name, value string, sensitive bool) {
	_ = c.wr.henc.WriteField(hpack.HeaderField{Name: name, Value: value, Sensitive: sensitive || uniqueValued[name]})
}

// writeHeaderBlock writes the block in c.wr.hbuf as HEADERS and
// CONTINUATION frames of at most the peer's frame size (wmu held).
func (c *Conn) writeHeaderBlock(id uint32, endStream bool) error {
	return wire.WriteHeaderBlock(c.wr.wfr, id, c.wr.hbuf.Bytes(), int(c.maxFrame.Load()), endStream)
}

var (
	_ http.ResponseWriter = (*responseWriter)(nil)
	_ http.Flusher        = (*responseWriter)(nil)
)
