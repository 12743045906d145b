package h1

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/fwdheaders"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/router"
	"github.com/straitmesh/strait/internal/proxy/tracing"
)

// This file carries an HTTP/1.1 request to a cluster that speaks HTTP/2
// upstream: the request becomes an http.Request
// for the cluster's HTTP/2 pool, and the response is written back in
// HTTP/1.1, chunked when its length is unknown. Trailers don't cross
// HTTP/1.1 in either direction (package forward's Trailers): the client's
// are not put on the upstream request, the upstream's are dropped.

// ForwardH2 sends the request to ep on cl over HTTP/2 and relays the
// response. It reports whether the downstream connection can carry another
// request.
func (x *Exchange) ForwardH2(cl *cluster.Cluster, ep cluster.Endpoint, rt *route.Route, tgt *route.WeightedCluster, ov *router.Overrides) bool {
	req := x.Req
	isHead, reqClose, reqMinor := req.IsHead, req.Close, req.Minor
	target := req.Target
	if req.Authority != nil {
		target = append(append([]byte(nil), req.Path...), req.Query...)
	}
	u, err := url.ParseRequestURI(string(target))
	if err != nil {
		return x.D.LocalReply(400, "", "")
	}
	u.Scheme, u.Host = x.D.Scheme(), ep.Address // the upstream :scheme
	hdr := make(http.Header, len(req.Headers)+2)
	for i := range req.Headers {
		h := &req.Headers[i]
		if h.Hop {
			if http1.EqualFold(h.Name, "Te") && teTrailers(h.Value) {
				hdr["Te"] = []string{"trailers"}
			}
			continue
		}
		if http1.EqualFold(h.Name, "Host") || http1.EqualFold(h.Name, "Content-Length") || http1.EqualFold(h.Name, "Expect") {
			continue
		}
		hdr.Add(string(h.Name), string(h.Value))
	}
	for _, h := range x.ReqExtra { // what the HTTP filters added (jwt_authn's output headers)
		hdr.Add(string(h.Name), string(h.Value))
	}
	if _, ok := hdr["X-Forwarded-Proto"]; !ok || x.OverwriteXFP {
		hdr["X-Forwarded-Proto"] = []string{fwdheaders.SchemeOf(x.Secure)}
	}
	if _, ok := hdr["X-Request-Id"]; !ok {
		hdr["X-Request-Id"] = []string{tracing.NewRequestID()}
	}
	if _, ok := hdr["User-Agent"]; !ok {
		hdr["User-Agent"] = nil // don't let the transport add Go's default
	}
	out := (&http.Request{
		Method:     string(req.Method),
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: reqMinor,
		Header:     hdr,
		Host:       string(req.Host),
	}).WithContext(context.Background())
	var body *h1Body
	switch req.Framing {
	case http1.FramingLength:
		out.ContentLength = req.ContentLength
		if x.Body != nil {
			// Read whole for the HTTP filters: a retry sends it again
			// (forward.RoundTrip, through GetBody).
			b := x.Body
			out.Body = io.NopCloser(bytes.NewReader(b))
			out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		} else if buf := x.R.Buffered(); int64(len(buf)) >= req.ContentLength {
			out.Body = io.NopCloser(bytes.NewReader(bytes.Clone(buf[:req.ContentLength])))
			x.R.Discard(int(req.ContentLength))
		} else {
			body = newH1Body(&http1.LengthReader{R: x.R, Left: req.ContentLength})
		}
	case http1.FramingChunked:
		out.ContentLength = -1
		x.ReqCh.Reset(x.R)
		body = newH1Body(&x.ReqCh)
	}
	if body != nil {
		out.Body = body
		if req.Expect100 {
			// The HTTP/2 upstream is not asked for 100-continue: tell the
			// client to send the body now.
			if _, err := x.NC.Write([]byte("HTTP/1.1 100 Continue\r\n\r\n")); err != nil {
				return false
			}
		}
	}

	forward.MutateRequest(out, rt, tgt)
	if ov != nil && *ov == (router.Overrides{}) {
		ov = nil
	}
	if x.Traced {
		out = out.WithContext(accesslog.TraceUpstream(out.Context(), x.Rec))
	}
	up := forward.RoundTrip(out, cl, ep, rt, ov, x.Dst, x.Src)
	defer up.Done()
	if up.Resp == nil {
		f := up.Fail
		if up.LimitExceeded {
			f.Flags += ",URX"
		}
		if body == nil {
			return x.D.UpstreamFailed(cl, ep, f, up.Err, true)
		}
		// Part of the body may be gone: answer, then close.
		x.Log.Debug("upstream request failed", "cluster", cl.Name, "endpoint", ep.Address, "error", up.Err)
		x.Rec.TransportFailure = cluster.TransportFailureReason(up.Err)
		cl.Stats.AddResponse(f.Code)
		if f.Code != 0 {
			x.D.WriteLocal(f.Code, f.Flags, f.Body, false)
		}
		x.NC.Close()
		body.Close()
		return false
	}
	resp := up.Resp
	defer resp.Body.Close()
	cl.Stats.AddResponse(resp.StatusCode)
	forward.MutateResponse(resp.Header, rt, tgt)
	if up.LimitExceeded {
		resp.Header.Set("X-Strait-Response-Flags", "URX")
	}

	keep := !reqClose && !x.D.Closing()
	noBody := isHead || http1.NoBody(resp.StatusCode)
	chunked := !noBody && resp.ContentLength < 0
	if chunked && reqMinor == 0 {
		keep, chunked = false, false // HTTP/1.0: the body ends with the connection
	}
	x.Rec.Code, x.Rec.Response = resp.StatusCode, accesslog.HTTPHeader(resp.Header)
	w := append((*x.Wbuf)[:0], "HTTP/1.1 "...)
	w = http1.AppendInt(w, int64(resp.StatusCode))
	w = append(w, ' ')
	w = append(w, ReasonPhrase(resp.StatusCode)...)
	w = append(w, "\r\n"...)
	forward.RemoveHop(resp.Header)
	delete(resp.Header, "Content-Length")
	x.D.EncodeResponse(resp.StatusCode, resp.Header)
	for k, vv := range resp.Header {
		for _, v := range vv {
			w = append(w, k...)
			w = append(w, ": "...)
			w = append(w, v...)
			w = append(w, "\r\n"...)
		}
	}
	switch {
	case chunked:
		w = append(w, "transfer-encoding: chunked\r\n"...)
	case resp.ContentLength >= 0 && (!http1.NoBody(resp.StatusCode) || resp.StatusCode == 304):
		w = append(w, "content-length: "...)
		w = http1.AppendInt(w, resp.ContentLength)
		w = append(w, "\r\n"...)
	}
	if !keep {
		w = append(w, "connection: close\r\n"...)
	} else if reqMinor == 0 {
		w = append(w, "connection: keep-alive\r\n"...)
	}
	w = append(w, "\r\n"...)
	*x.Wbuf = w
	_, err = x.NC.Write(w)
	if err == nil && !noBody {
		rerr, werr := copyBody(x.NC, resp.Body, chunked, func() http.Header {
			tr := x.Trailers.Forward(resp.Trailer, forward.WireOf(resp.ProtoMajor), forward.WireHTTP1)
			if len(tr) > 0 {
				x.D.EncodeTrailers(tr)
			}
			return tr
		}, x.RespBytes)
		err = errors.Join(rerr, werr)
	}
	if body != nil && !body.finished(bodyFinishWait) {
		// The response is complete but the request body isn't: the
		// client or the upstream stopped early. Stop reading downstream
		// before the connection's reader is released.
		x.NC.Close()
		body.Close()
		return false
	}
	return err == nil && keep
}

// appendTrailer appends trailer fields in HTTP/1.1 form, sorted by name.
func appendTrailer(dst []byte, t http.Header) []byte {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range t[k] {
			dst = append(dst, k...)
			dst = append(dst, ": "...)
			dst = append(dst, v...)
			dst = append(dst, "\r\n"...)
		}
	}
	return dst
}

// h1Body is a downstream request body read by the HTTP/2 transport's
// goroutine. Close waits for a Read in progress and makes later ones fail,
// so that once it returns nothing touches the connection's reader.
type h1Body struct {
	eof chan struct{} // closed when the body was read to its end

	mu     sync.Mutex // held during Read; guards r and closed
	r      io.Reader
	closed bool
	done   bool
}

func newH1Body(r io.Reader) *h1Body { return &h1Body{r: r, eof: make(chan struct{})} }

func (b *h1Body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return 0, io.EOF
	}
	if b.closed {
		return 0, io.ErrClosedPipe
	}
	n, err := b.r.Read(p)
	if lr, ok := b.r.(*http1.LengthReader); ok && lr.Left == 0 && err == nil {
		err = io.EOF // the last bytes: say so now rather than on the next Read
	}
	if errors.Is(err, io.EOF) {
		b.done = true
		close(b.eof)
	}
	return n, err
}

func (b *h1Body) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

// finished reports whether the body was read to its end, waiting up to d
// for it.
func (b *h1Body) finished(d time.Duration) bool {
	select {
	case <-b.eof:
		return true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-b.eof:
		return true
	case <-t.C:
		return false
	}
}

// teTrailers reports whether a TE field asks for trailers, the only TE
// value that HTTP/2 allows (RFC 9113 §8.2.2).
func teTrailers(v []byte) bool {
	for _, f := range strings.Split(string(v), ",") {
		if name, _, _ := strings.Cut(f, ";"); strings.EqualFold(strings.TrimSpace(name), "trailers") {
			return true
		}
	}
	return false
}
