package hcm

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/route"
)

// Envoy's local reply bodies.
const (
	bodyNoHealthy     = "no healthy upstream"
	bodyConnectFailed = "upstream connect error or disconnect/reset before headers. reset reason: connection failure"
)

// hopHeaders are removed in both directions (RFC 9110 §7.6.1), with
// HTTP2-Settings, connection-specific too (RFC 9113 §3.2.1): an h2c upgrade
// request is served as HTTP/1.1, as Envoy's HTTP/1 codec does.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Http2-Settings",
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func localReply(w http.ResponseWriter, code int, flags, body string) {
	h := w.Header()
	if flags != "" {
		h.Set("X-Strait-Response-Flags", flags)
		if flags == "UO" {
			h.Set("X-Envoy-Overloaded", "true")
		}
	}
	if body != "" {
		h.Set("Content-Type", "text/plain")
	}
	w.WriteHeader(code)
	io.WriteString(w, body)
}

func removeHop(h http.Header) {
	if c, ok := h["Connection"]; ok {
		for _, v := range c {
			for _, f := range splitComma(v) {
				delete(h, http.CanonicalHeaderKey(f))
			}
		}
	}
	for _, k := range hopHeaders {
		delete(h, k)
	}
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			f := s[start:i]
			for len(f) > 0 && (f[0] == ' ' || f[0] == '\t') {
				f = f[1:]
			}
			for len(f) > 0 && (f[len(f)-1] == ' ' || f[len(f)-1] == '\t') {
				f = f[:len(f)-1]
			}
			if f != "" {
				out = append(out, f)
			}
			start = i + 1
		}
	}
	return out
}

func newRequestID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	c, ok := r.Context().Value(connKey{}).(*conn)
	if !ok {
		localReply(w, http.StatusInternalServerError, "", errNoConn.Error())
		return
	}
	var unlogged accesslog.Record // written to, never logged, when the filter has no access log
	rec := &unlogged
	if len(c.filter.AccessLog) > 0 {
		var done func()
		w, r, rec, done = startStreamLog(w, r, c) // accesslog.go
		defer done()
	}
	var code *int // the status, for the downstream stats (stats.go)
	if rec != &unlogged {
		w, code = c.filter.beginStream(w, r, &rec.Code)
	} else {
		w, code = c.filter.beginStream(w, r, nil)
	}
	defer endStream(c.filter.hstats, code)
	if r.ProtoMajor == 1 && r.ProtoMinor == 0 && !c.filter.acceptHTTP10 { // errHTTP10 (h1reply.go)
		rec.Flags = "DPE"
		w.Header().Set("Connection", "close")
		localReply(w, http.StatusUpgradeRequired, "", "Upgrade Required")
		return
	}
	if rejectFragment(w, r) { // pathnorm.go
		return
	}
	setForwardedProto(r, c)    // scheme.go
	client := c.forwardHTTP(r) // xff.go
	c.forwardXFCC(r)           // xfcc.go
	// The request's :scheme: what routes match, and an HTTP/2 upstream's
	// (and a shadow's) :scheme.
	r.URL.Scheme = streamScheme(r, c) // scheme.go
	rec.DownstreamRemote = client.remote
	path := r.URL.Path
	if r.URL.RawPath != "" {
		path = r.URL.RawPath
	}
	if c.filter.pathNorm.active() {
		var done bool
		if path, done = c.filter.pathNorm.serveStream(w, r, path); done { // pathnorm.go
			return
		}
	}
	st := newH2Stream(w, r, c, client, false) // h2stream.go
	defer st.complete(rec)
	w = st.writer()
	rt, done := st.decodeAndRoute(s, path)
	if done {
		return
	}
	rec.RouteName = rt.Name
	if rt.HasIdleTimeout {
		setStreamIdle(r.Context(), rt.IdleTimeout) // h2timeouts.go
	}
	if localRouteReply(w, r, rt, path) {
		return
	}
	tgt := rt.Pick()
	cl := s.clusters.Get(tgt.Name)
	if cl == nil {
		localReply(w, http.StatusServiceUnavailable, "NC", "")
		return
	}
	rec.UpstreamCluster, rec.UpstreamStatName = tgt.Name, cl.Stats.Name
	hash, hasHash, setCookie := requestHashHTTP(rt, r, client.remote)
	ep, err := cl.PickRequest(c.dst, hash, hasHash)
	if err != nil {
		f := pickFailure(err)
		localReply(w, f.code, f.flags, f.body)
		return
	}
	defer cl.Finish(ep)
	rec.UpstreamHost = ep.Address
	if setCookie != "" {
		w.Header().Add("Set-Cookie", setCookie)
	}
	ep.Source = c.src
	ep.Downstream = downstreamFor(cl, c.RemoteAddr(), c.dst)
	s.forward(w, r, c, cl, ep, rt, tgt)
}

func (s *Server) forward(w http.ResponseWriter, r *http.Request, c *conn, cl *cluster.Cluster, ep cluster.Endpoint, rt *route.Route, tgt *route.WeightedCluster) {
	ctx := r.Context()
	out := r.WithContext(ctx) // shallow copy; r is ours until we return
	out.RequestURI = ""
	out.Close = false
	h := out.Header
	removeHop(h)
	addForwardHeaders(out, r)
	c.filter.forwardRequestTrailers(out, r, upstreamWire(cl, r)) // trailers.go
	ov := takeOverrides(h)
	mutateHTTPRequest(out, rt, tgt)

	x := roundTripRouted(out, cl, ep, rt, ov, c.dst, c.src)
	defer x.done()
	if x.resp == nil {
		f := x.fail
		if f.code == 0 {
			return // downstream went away
		}
		if x.limitExceeded {
			f.flags += ",URX"
		}
		s.log.Debug("upstream request failed", "cluster", cl.Name, "endpoint", ep.Address, "error", x.err)
		logTransportFailure(r.Context(), x.err) // accesslog.go
		cl.Stats.AddResponse(f.code)
		localReply(w, f.code, f.flags, f.body)
		return
	}
	resp := x.resp
	defer resp.Body.Close()
	cl.Stats.AddResponse(resp.StatusCode) // outlier detection: roundTripRouted reports

	wh := w.Header()
	for k, v := range resp.Header {
		wh[k] = v
	}
	removeHop(wh)
	mutateHTTPResponse(wh, rt, tgt)
	if x.limitExceeded {
		wh.Set("X-Strait-Response-Flags", "URX")
	}
	w.WriteHeader(resp.StatusCode)

	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	var err error
	if resp.ContentLength >= 0 {
		_, err = io.CopyBuffer(writerOnly{w}, resp.Body, *bp)
	} else {
		err = copyFlushing(w, resp.Body, *bp)
	}
	if err != nil {
		// Can't send a status any more: abort the downstream connection so
		// the client sees a truncated response, like Envoy.
		panic(http.ErrAbortHandler)
	}
	// Which trailers cross is trailers.go's (none to an HTTP/1.1 client);
	// TrailerPrefix sends those that were not announced.
	for k, v := range c.filter.forwardTrailers(resp.Trailer, wireOf(resp.ProtoMajor), wireOf(r.ProtoMajor)) {
		wh[http.TrailerPrefix+k] = v
	}
}

// writerOnly hides ResponseWriter's ReadFrom so CopyBuffer uses our buffer.
type writerOnly struct{ io.Writer }

func copyFlushing(w http.ResponseWriter, r io.Reader, buf []byte) error {
	rc := http.NewResponseController(w)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if ferr := rc.Flush(); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// addForwardHeaders completes an upstream request made from r on the
// net/http paths (HTTP/1.1 and HTTP/2): x-request-id unless present, no Go
// default User-Agent, and no body for an empty one. x-forwarded-proto is
// already on r (setForwardedProto).
func addForwardHeaders(out, r *http.Request) {
	h := out.Header
	if _, ok := h["X-Request-Id"]; !ok {
		h["X-Request-Id"] = []string{newRequestID()}
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = nil // don't let the client add Go's default
	}
	if r.ContentLength == 0 {
		out.Body = nil
	}
}
