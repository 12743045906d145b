package h1

// This file writes the upstream request head: the request's fields as
// parsed (less the hop-by-hop ones and those the proxy writes itself), the
// router's mutations, and the fields the proxy adds.

import (
	"strconv"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/fwdheaders"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/router"
	"github.com/straitmesh/strait/internal/proxy/tracing"
)

// appendRequestHead writes the upstream request head into w.
func (x *Exchange) appendRequestHead(w []byte, ep cluster.Endpoint) []byte {
	req := x.Req
	w = append(w, req.Method...)
	w = append(w, ' ')
	if x.PathOverride != nil {
		w = append(w, x.PathOverride...)
		w = append(w, req.Query...)
	} else if req.Authority != nil {
		w = append(w, req.Path...)
		w = append(w, req.Query...)
	} else {
		w = append(w, req.Target...)
	}
	w = append(w, " HTTP/1.1\r\n"...)
	var xfp, rid bool
	for i := range req.Headers {
		h := &req.Headers[i]
		if h.Hop {
			continue
		}
		switch len(h.Name) {
		case 4:
			if (req.Authority != nil || x.HostOverride != nil) && http1.EqualFold(h.Name, "Host") {
				continue // replaced by the target's authority below
			}
		case 6:
			if req.Expect100 && http1.EqualFold(h.Name, "Expect") {
				continue // answered here (see forward), as Envoy does
			}
		case 12:
			if !rid && http1.EqualFold(h.Name, "X-Request-Id") {
				rid = true
			}
		case 14:
			if http1.EqualFold(h.Name, "Content-Length") {
				continue // framing is written below
			}
		case 17:
			if http1.EqualFold(h.Name, "X-Forwarded-Proto") {
				if x.OverwriteXFP {
					continue // the connection's is written below
				}
				xfp = true
			}
		}
		w = http1.AppendHeader(w, h.Name, h.Value)
	}
	for i := range x.ReqExtra {
		w = http1.AppendHeader(w, x.ReqExtra[i].Name, x.ReqExtra[i].Value)
	}
	if x.HostOverride != nil {
		w = http1.AppendHeader(w, hostName, x.HostOverride)
	} else if req.Authority != nil {
		w = http1.AppendHeader(w, hostName, req.Authority)
	} else if !req.HasHost {
		w = append(w, "host: "...)
		w = append(w, ep.Address...)
		w = append(w, "\r\n"...)
	}
	if !xfp {
		w = append(w, "x-forwarded-proto: "...)
		w = append(w, fwdheaders.SchemeOf(x.Secure)...)
		w = append(w, "\r\n"...)
	}
	if !rid {
		w = append(w, "x-request-id: "...)
		w = tracing.AppendRequestID(w)
		w = append(w, "\r\n"...)
	}
	switch req.Framing {
	case http1.FramingLength:
		w = append(w, "content-length: "...)
		w = http1.AppendInt(w, req.ContentLength)
		w = append(w, "\r\n"...)
	case http1.FramingChunked:
		w = append(w, "transfer-encoding: chunked\r\n"...)
	default:
		if req.ContentLength == 0 {
			w = append(w, "content-length: 0\r\n"...)
		}
	}
	return append(w, "\r\n"...)
}

var hostName = []byte("host")

var attemptCountField = []byte(router.HeaderAttemptCount + ": ")

// setAttemptCount rewrites the x-envoy-attempt-count value w[at:end] to n,
// returning the head and the value's new end.
func setAttemptCount(w []byte, at, end, n int) ([]byte, int) {
	v := strconv.AppendInt(nil, int64(n), 10)
	if len(v) == end-at {
		copy(w[at:end], v)
		return w, end
	}
	out := make([]byte, 0, len(w)+len(v))
	out = append(out, w[:at]...)
	out = append(out, v...)
	out = append(out, w[end:]...)
	return out, at + len(v)
}
