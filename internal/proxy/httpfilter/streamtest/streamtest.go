// Package streamtest is a recording fake of httpfilter.Stream for filter
// unit tests: headers in an ordered list, a route naming a cluster, and
// the local reply it was asked for. Each filter is also tested through the
// real HCM.
package streamtest

import (
	"net/netip"
	"strings"
	"time"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// Headers is an ordered, case-insensitive header list.
type Headers struct {
	Fields [][2]string
}

var _ httpfilter.HeaderMap = (*Headers)(nil)

// NewHeaders makes a list from name, value pairs.
func NewHeaders(kv ...string) *Headers {
	h := &Headers{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// Lookup implements httpfilter.HeaderMap.
func (h *Headers) Lookup(name string) (string, bool) {
	var vals []string
	for _, f := range h.Fields {
		if strings.EqualFold(f[0], name) {
			vals = append(vals, f[1])
		}
	}
	return strings.Join(vals, ","), vals != nil
}

// Range implements httpfilter.HeaderMap.
func (h *Headers) Range(f func(name, value string) bool) {
	for _, kv := range h.Fields {
		if !f(kv[0], kv[1]) {
			return
		}
	}
}

// Set implements httpfilter.HeaderMap.
func (h *Headers) Set(name, value string) {
	h.Del(name)
	h.Add(name, value)
}

// Add implements httpfilter.HeaderMap.
func (h *Headers) Add(name, value string) { h.Fields = append(h.Fields, [2]string{name, value}) }

// Del implements httpfilter.HeaderMap.
func (h *Headers) Del(name string) {
	out := h.Fields[:0]
	for _, f := range h.Fields {
		if !strings.EqualFold(f[0], name) {
			out = append(out, f)
		}
	}
	h.Fields = out
}

// Route is a fixed route.
type Route struct {
	RouteName, ClusterName string
	Operation              string // the decorator's
}

// Name implements httpfilter.Route.
func (r *Route) Name() string { return r.RouteName }

// Cluster implements httpfilter.Route.
func (r *Route) Cluster() string { return r.ClusterName }

// PerFilterConfig implements httpfilter.Route.
func (r *Route) PerFilterConfig(string) any { return nil }

// Decorator implements httpfilter.Route: Operation, propagated.
func (r *Route) Decorator() (string, bool) { return r.Operation, true }

// Stream is the fake stream. Set the exported fields before use.
type Stream struct {
	MethodV, HostV, PathV, QueryV, SchemeV, ProtocolV string
	Request                                           *Headers
	RouteV                                            *Route
	Conn                                              httpfilter.Connection
	Remote                                            netip.Addr
	MD                                                httpfilter.Metadata
	// What the filter asked for.
	ReplyStatus   int
	ReplyBody     string
	ResponseAdded [][2]string
	Flags         []string
	scratch       [8]any
}

var _ httpfilter.Stream = (*Stream)(nil)

// New returns a GET of path on host over HTTP/1.1 with the given request
// headers.
func New(host, path string, headers *Headers) *Stream {
	if headers == nil {
		headers = NewHeaders()
	}
	return &Stream{MethodV: "GET", HostV: host, PathV: path, SchemeV: "http", ProtocolV: "HTTP/1.1", Request: headers}
}

// Method implements httpfilter.Stream.
func (s *Stream) Method() string { return s.MethodV }

// Host implements httpfilter.Stream.
func (s *Stream) Host() string { return s.HostV }

// Path implements httpfilter.Stream.
func (s *Stream) Path() string { return s.PathV }

// Query implements httpfilter.Stream.
func (s *Stream) Query() string { return s.QueryV }

// Scheme implements httpfilter.Stream.
func (s *Stream) Scheme() string { return s.SchemeV }

// Protocol implements httpfilter.Stream.
func (s *Stream) Protocol() string { return s.ProtocolV }

// RequestHeaders implements httpfilter.Stream.
func (s *Stream) RequestHeaders() httpfilter.HeaderMap { return s.Request }

// ClearRoute implements httpfilter.Stream.
func (s *Stream) ClearRoute() {}

// Connection implements httpfilter.Stream.
func (s *Stream) Connection() *httpfilter.Connection { return &s.Conn }

// RemoteAddr implements httpfilter.Stream.
func (s *Stream) RemoteAddr() netip.Addr { return s.Remote }

// Metadata implements httpfilter.Stream.
func (s *Stream) Metadata() *httpfilter.Metadata { return &s.MD }

// Wait implements httpfilter.Stream.
func (s *Stream) Wait(time.Duration) bool { return true }

// Scratch implements httpfilter.Stream.
func (s *Stream) Scratch(i int) *any { return &s.scratch[i] }

// AddResponseHeader implements httpfilter.Stream.
func (s *Stream) AddResponseHeader(name, value string) {
	s.ResponseAdded = append(s.ResponseAdded, [2]string{name, value})
}

// Route implements httpfilter.Stream.
func (s *Stream) Route() httpfilter.Route {
	if s.RouteV == nil {
		return nil
	}
	return s.RouteV
}

// AddResponseFlag records a response flag.
func (s *Stream) AddResponseFlag(flag string) { s.Flags = append(s.Flags, flag) }

// LocalReply implements httpfilter.Stream.
func (s *Stream) LocalReply(status int, _ int, body, _ string, _ func(set func(name, value string))) {
	s.ReplyStatus, s.ReplyBody = status, body
}

// ByteSize implements httpfilter.ByteSizer, as the codecs' maps do.
func (h *Headers) ByteSize() int64 {
	var n int64
	for _, f := range h.Fields {
		n += int64(len(f[0]) + len(f[1]))
	}
	return n
}
