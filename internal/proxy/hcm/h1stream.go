package hcm

// The HTTP/1.1 codec's httpfilter.Stream: one per connection (h1conn's
// stream field), reset for every request, so that running the filter
// chain allocates nothing of its own. The request headers are the codec's
// parsed fields (h1HeaderMap); the response head's fields go through the
// encoders the same way (AppendResponseHead, the local replies).

import (
	"net/netip"
	"strconv"
	"time"
	"unsafe"

	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/fwdheaders"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/rbac"
)

// h1stream is the request in progress on an HTTP/1.1 connection as its
// filters see it. Only the connection's goroutine touches it.
type h1stream struct {
	filterState
	c      *h1conn
	hdrs   h1HeaderMap // the request's fields
	resp   h1HeaderMap // a response head's fields, for the encoders
	local  []http1.Header
	in     rbac.Input
	keep   bool // after a filter's LocalReply: the connection can carry another request
	active bool // a request is in progress (Complete not yet called)
	// upHost is the last upstream host complete parsed and upAddr what
	// it parsed to (invalid: not an ip:port): a connection's requests
	// mostly go to the same endpoint, whose address string is the
	// endpoint's own (immutable), so comparing it costs less than
	// parsing it for every request.
	upHost string
	upAddr netip.AddrPort
}

// begin readies the stream for the request in c.req; rreq is set after.
func (st *h1stream) begin(c *h1conn) {
	st.c = c
	st.reset(c.filter)
	st.hdrs = h1HeaderMap{hs: &c.req.Headers}
	st.keep = false
	st.active = true
}

func (st *h1stream) Method() string { return st.rreq.Method }
func (st *h1stream) Host() string   { return st.rreq.Host }
func (st *h1stream) Path() string   { return st.rreq.Path }
func (st *h1stream) Query() string  { return st.rreq.Query }
func (st *h1stream) Scheme() string { return st.rreq.Scheme }

func (st *h1stream) Protocol() string {
	if st.c.req.Minor == 0 {
		return "HTTP/1.0"
	}
	return "HTTP/1.1"
}

func (st *h1stream) RequestHeaders() httpfilter.HeaderMap { return &st.hdrs }

func (st *h1stream) Connection() *httpfilter.Connection {
	c := st.c
	if c.fconn == nil {
		c.fconn = connectionOf(c.tracked, c.dst)
	}
	return c.fconn
}

func (st *h1stream) RemoteAddr() netip.Addr { return st.c.client.Remote.Addr() }

func (st *h1stream) Metadata() *httpfilter.Metadata { return &st.c.meta }

func (st *h1stream) Wait(d time.Duration) bool { return st.c.faultDelay(d) }

// LocalReply answers the request: in gRPC's trailers-only form when the
// filter gives a gRPC status and the request is gRPC; else status and
// body. (The HTTP/1.1 path does not map an HTTP status to a gRPC one.)
func (st *h1stream) LocalReply(status, grpcStatus int, body, flags string, headers func(set func(name, value string))) {
	st.replied = true
	c := st.c
	if ct, _ := c.req.Headers.Lookup("content-type"); grpcStatus >= 0 && forward.GRPCContentType(ct) {
		st.keep = c.filterReply(200, flags, "", func(set func(string, string)) {
			set("content-type", "application/grpc")
			set("grpc-status", strconv.Itoa(grpcStatus))
			set("grpc-message", grpcPercentEncode(body))
			if headers != nil {
				headers(set)
			}
		})
		return
	}
	st.keep = c.filterReply(status, flags, body, headers)
}

// RBACInput is the RBAC engine's input for the request, from the fields
// routing reads (filters/http/rbac.InputSource); it allocates nothing.
func (st *h1stream) RBACInput() *rbac.Input {
	c := st.c
	if c.authz == nil {
		c.authz = rbac.ConnectionOf(c.tracked, c.dst)
	}
	st.in = rbac.Input{Conn: c.authz, Request: &st.rreq, RemoteIP: c.client.Remote.Addr(), Metadata: &c.meta}
	return &st.in
}

// complete tells the chain's Completers about the request that ended,
// from its access log record.
func (st *h1stream) complete() {
	if !st.active {
		return
	}
	st.active = false
	if st.f.chain == nil || len(st.f.chain.completers) == 0 {
		return
	}
	r := &st.c.rec
	info := &st.info
	*info = httpfilter.StreamInfo{
		Status: r.Code, GRPCStatus: -1, Flags: r.Flags, Cluster: r.UpstreamCluster, Service: r.UpstreamService,
		UpstreamPeerPrincipal: r.UpstreamPeerPrincipal, UpstreamLocalPrincipal: r.UpstreamLocalPrincipal,
		BytesIn: r.BytesReceived, BytesOut: r.BytesSent, // endLog counted the streamed body
	}
	info.UpstreamHost = st.upstreamAddr(r.UpstreamHost)
	if st.c.x.Resp.Status != 0 && r.Response != nil {
		info.UpstreamHeaders = r.Response
	}
	st.filterState.complete(st, info)
	*info = httpfilter.StreamInfo{} // drop the references to the request
}

// upstreamAddr is host ("ip:port") parsed, the zero AddrPort when it is
// not one (a socket path, none); the last host's is kept.
func (st *h1stream) upstreamAddr(host string) netip.AddrPort {
	if host != st.upHost {
		st.upHost, st.upAddr = host, netip.AddrPort{}
		if ap, err := netip.ParseAddrPort(host); err == nil {
			st.upAddr = ap
		}
	}
	return st.upAddr
}

// h1HeaderMap is a head's fields as httpfilter.HeaderMap: a removed field
// leaves the slice, an added one joins it (as the request's forwarding
// edits it, fwdheaders.XFF), so that later filters, the route match and the
// upstream see the edits. Hop fields are not in it.
type h1HeaderMap struct{ hs *http1.Headers }

func (m *h1HeaderMap) Lookup(name string) (string, bool) { return m.hs.Lookup(name) }

func (m *h1HeaderMap) Range(f func(name, value string) bool) {
	for i := range *m.hs {
		h := &(*m.hs)[i]
		if h.Hop {
			continue
		}
		if !f(http1.UnsafeString(h.Name), http1.UnsafeString(h.Value)) {
			return
		}
	}
}

// ByteSize is the fields' names' and values' lengths (httpfilter.ByteSizer).
func (m *h1HeaderMap) ByteSize() int64 {
	var n int64
	for i := range *m.hs {
		if h := &(*m.hs)[i]; !h.Hop {
			n += int64(len(h.Name) + len(h.Value))
		}
	}
	return n
}

func (m *h1HeaderMap) Set(name, value string) {
	m.Del(name)
	m.Add(name, value)
}

// Add copies the field into one allocation (the name's capacity ends
// where the value starts, so neither can grow into the other).
func (m *h1HeaderMap) Add(name, value string) {
	b := make([]byte, len(name)+len(value))
	copy(b, name)
	copy(b[len(name):], value)
	*m.hs = append(*m.hs, http1.Header{Name: b[:len(name):len(name)], Value: b[len(name):]})
}

func (m *h1HeaderMap) Del(name string) { *m.hs = fwdheaders.RemoveHeader(*m.hs, name) }

// SetStatic is Set for a name and value that never change and outlive
// the stream (httpfilter.StaticSetter): the field refers to them instead
// of a copy. Their capacity is their length, so an edit that appends to
// a field's value (as x-forwarded-for's does) copies it first; nothing
// writes into a field's bytes in place (they are the read buffer's).
func (m *h1HeaderMap) SetStatic(name, value string) {
	m.Del(name)
	*m.hs = append(*m.hs, http1.Header{Name: unsafe.Slice(unsafe.StringData(name), len(name)), Value: unsafe.Slice(unsafe.StringData(value), len(value))})
}

// TakeFields removes every field named a or b and returns the first
// value of each and how many there were, in one pass over the fields
// (metadataexchange.FieldTaker). A name's length is compared first, then
// its bytes as they are (proxies send these names in lower case) before
// case-insensitively, and only the fields after the first taken one
// move. The values alias the
// read buffer, as Lookup's do.
func (m *h1HeaderMap) TakeFields(a, b string) (va string, na int, vb string, nb int) {
	hs := *m.hs
	j := -1 // where the next kept field goes, once one was taken
	for i := range hs {
		h := &hs[i]
		switch n := len(h.Name); {
		case n == len(a) && (string(h.Name) == a || http1.EqualFold(h.Name, a)):
			if na == 0 {
				va = http1.UnsafeString(h.Value)
			}
			na++
		case n == len(b) && (string(h.Name) == b || http1.EqualFold(h.Name, b)):
			if nb == 0 {
				vb = http1.UnsafeString(h.Value)
			}
			nb++
		default:
			if j >= 0 {
				hs[j] = *h
				j++
			}
			continue
		}
		if j < 0 {
			j = i
		}
	}
	if j >= 0 {
		clear(hs[j:])
		*m.hs = hs[:j]
	}
	return va, na, vb, nb
}

// SetStaticPair is SetStatic of two fields, the old ones removed in one
// pass (metadataexchange.StaticPairSetter).
func (m *h1HeaderMap) SetStaticPair(a, va, b, vb string) {
	m.TakeFields(a, b)
	*m.hs = append(*m.hs,
		http1.Header{Name: unsafe.Slice(unsafe.StringData(a), len(a)), Value: unsafe.Slice(unsafe.StringData(va), len(va))},
		http1.Header{Name: unsafe.Slice(unsafe.StringData(b), len(b)), Value: unsafe.Slice(unsafe.StringData(vb), len(vb))})
}

// encodeLocal runs the encoders on a local reply's head: its own fields
// (those hdrs sets) and the filters' are in st.local afterwards, to be
// written in order.
func (st *h1stream) encodeLocal(code int, hdrs func(set func(name, value string))) {
	st.local = st.local[:0]
	if hdrs != nil {
		hdrs(func(name, value string) {
			st.local = append(st.local, http1.Header{Name: []byte(name), Value: []byte(value)})
		})
	}
	st.resp = h1HeaderMap{hs: (*http1.Headers)(&st.local)}
	st.encodeHeaders(st, code, &st.resp)
}

var (
	_ httpfilter.Stream       = (*h1stream)(nil)
	_ httpfilter.HeaderMap    = (*h1HeaderMap)(nil)
	_ httpfilter.StaticSetter = (*h1HeaderMap)(nil)
)

// encodeUpstream runs the encoders on an upstream response head: hs are
// its fields, extra the route's additions (written after them). The
// fields the filters set (AddResponseHeader) join hs first, replacing the
// upstream's, and are then cleared from addResp so they are not written
// twice.
func (st *h1stream) encodeUpstream(status int, hs *http1.Headers, extra []http1.Header) {
	*hs = append(*hs, extra...)
	st.resp = h1HeaderMap{hs: hs}
	for _, h := range st.addResp {
		st.resp.Set(h.name, h.value)
	}
	st.addResp = st.addResp[:0]
	st.encodeHeaders(st, status, &st.resp)
	st.c.x.RespExtra = st.c.x.RespExtra[:0] // in hs now
}

// The HTTP/1.1 path's side of the filter chain's replies and response
// heads: a fault delay waits here (watching that the client is still
// there); a filter's local reply and the router's carry the filters'
// response flags and fields and pass the encoders of the filters that ran.

// delayPoll is how often a fault delay checks that its client is still
// there, so that a client that leaves ends the delay (Envoy resets the
// stream, whose timer goes with it).
const delayPoll = 100 * time.Millisecond

// faultDelay holds the request for d, and reports false if the client
// went away meanwhile.
func (c *h1conn) faultDelay(d time.Duration) bool {
	end := time.Now().Add(d)
	for {
		left := time.Until(end)
		if left <= 0 {
			return true
		}
		time.Sleep(min(left, delayPoll))
		if http1.Peek(c.nc) == http1.PeekClosed {
			return false
		}
	}
}

// filterReply is a filter's local reply with its headers (set by hdrs),
// keeping the connection when its request body can be skipped, as
// localReply does.
func (c *h1conn) filterReply(code int, flags, body string, hdrs func(set func(name, value string))) bool {
	keep := !c.req.Close && !c.closing() && c.discardRequestBody()
	w := c.appendLocalStatus(code) // h1reply.go
	w = c.appendLocalHeaders(w, code, flags, hdrs)
	return c.finishLocal(w, body, keep) && keep
}

// appendLocalHeaders appends a local reply's fields: its own (hdrs), the
// filters' (AddResponseHeader, after the encoders of the filters that ran
// saw them all) and the response flags, the filters' first ("DI,FI").
func (c *h1conn) appendLocalHeaders(w []byte, code int, flags string, hdrs func(set func(name, value string))) []byte {
	st := &c.stream
	flags = st.mergeFlags(flags)
	c.rec.Flags = flags
	if flags != "" {
		w = append(w, "x-strait-response-flags: "...)
		w = append(w, flags...)
		w = append(w, "\r\n"...)
	}
	if st.hasEncoders() {
		st.encodeLocal(code, func(set func(name, value string)) {
			if hdrs != nil {
				hdrs(set)
			}
			for _, h := range st.addResp {
				set(h.name, h.value)
			}
		})
		for i := range st.local {
			w = http1.AppendHeader(w, st.local[i].Name, st.local[i].Value)
		}
		return w
	}
	if hdrs != nil {
		hdrs(func(name, value string) {
			w = append(w, name...)
			w = append(w, ": "...)
			w = append(w, value...)
			w = append(w, "\r\n"...)
		})
	}
	for _, h := range st.addResp {
		w = append(w, h.name...)
		w = append(w, ": "...)
		w = append(w, h.value...)
		w = append(w, "\r\n"...)
	}
	return w
}

// replacedByFilters reports whether an upstream response field is one a
// filter set (AddResponseHeader replaces the upstream's own).
func (st *h1stream) replacedByFilters(name []byte) bool {
	for _, h := range st.addResp {
		if http1.EqualFold(name, h.name) {
			return true
		}
	}
	return false
}

// appendFilterResponseHeaders appends the fields filters set on an
// upstream response and their response flags.
func (st *h1stream) appendFilterResponseHeaders(w []byte) []byte {
	for _, h := range st.addResp {
		w = append(w, h.name...)
		w = append(w, ": "...)
		w = append(w, h.value...)
		w = append(w, "\r\n"...)
	}
	if st.flags != "" {
		w = append(w, "x-strait-response-flags: "...)
		w = append(w, st.flags...)
		w = append(w, "\r\n"...)
	}
	return w
}
