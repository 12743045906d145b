package forward

// Request mirroring (route request_mirror_policies), as Envoy's router
// shadows a request (source/common/router/router.cc, shadow_writer): a
// copy goes to the mirror cluster with "-shadow" appended to its host,
// fire-and-forget. The shadow's response is read and dropped; it never
// delays, fails or changes the main request. A request body is mirrored
// when it is small enough to hold (maxShadowBody) and already at hand;
// a request whose body is not is not mirrored, and at most maxShadows
// shadows are in flight per proxy (more are dropped), so a slow shadow
// service cannot make the proxy hold unbounded memory.

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/route"
)

// Clusters resolves cluster names (the cluster manager).
type Clusters interface {
	Get(name string) *cluster.Cluster
}

const (
	// maxShadowBody bounds the request body a shadow carries.
	maxShadowBody = 64 << 10
	// maxShadows bounds the shadow requests in flight per proxy.
	maxShadows = 128
	// shadowTimeout bounds one shadow request, response included.
	shadowTimeout = 30 * time.Second
	// maxShadowResponse is how much of a shadow's response body is read
	// (so that its connection can be reused) before it is closed.
	maxShadowResponse = 1 << 20
)

// Shadowing sends the shadow requests of one HTTP server and owns their
// goroutines: close cancels them and waits until they are gone.
type Shadowing struct {
	log      *slog.Logger
	clusters Clusters
	slots    chan struct{} // one per shadow in flight
	ctx      context.Context
	cancel   context.CancelFunc

	mu     sync.Mutex // guards closed and wg.Add against close's Wait
	closed bool
	wg     sync.WaitGroup
}

// NewShadowing starts the shadowing of one server; Close ends it.
func NewShadowing(log *slog.Logger, clusters Clusters) *Shadowing {
	ctx, cancel := context.WithCancel(context.Background())
	return &Shadowing{log: log, clusters: clusters, slots: make(chan struct{}, maxShadows), ctx: ctx, cancel: cancel}
}

// Close cancels the shadows in flight and waits until they are gone; a
// shadow sent after Close is dropped.
func (sh *Shadowing) Close() {
	sh.mu.Lock()
	sh.closed = true
	sh.mu.Unlock()
	sh.cancel()
	sh.wg.Wait()
}

// shadowHost is Envoy's shadow host: "-shadow" after the host name, before
// any port.
func shadowHost(host string) string {
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.HasSuffix(host, "]") {
		return host[:i] + "-shadow" + host[i:]
	}
	return host + "-shadow"
}

// MirrorH1 mirrors the HTTP/1.1 request req, whose body (if any) starts at
// buffered; proto is its x-forwarded-proto as the main request leaves,
// scheme its :scheme.
func (sh *Shadowing) MirrorH1(mirrors []route.Mirror, req *http1.Request, buffered []byte, proto, scheme string) {
	var body []byte
	switch req.Framing {
	case http1.FramingLength:
		if req.ContentLength > maxShadowBody || int64(len(buffered)) < req.ContentLength {
			sh.log.Debug("request not mirrored: body not at hand", "content_length", req.ContentLength)
			return
		}
		body = buffered[:req.ContentLength]
	case http1.FramingChunked:
		sh.log.Debug("request not mirrored: chunked body")
		return
	}
	target := req.Target
	if req.Authority != nil {
		target = append(append([]byte(nil), req.Path...), req.Query...)
	}
	for _, m := range mirrors {
		if !m.Fraction.Hit() {
			continue
		}
		u, err := url.ParseRequestURI(string(target))
		if err != nil {
			return
		}
		u.Scheme = scheme
		h := make(http.Header, len(req.Headers))
		for i := range req.Headers {
			f := &req.Headers[i]
			if f.Hop || http1.EqualFold(f.Name, "Host") || http1.EqualFold(f.Name, "Content-Length") || http1.EqualFold(f.Name, "Expect") {
				continue
			}
			h.Add(string(f.Name), string(f.Value))
		}
		h["X-Forwarded-Proto"] = []string{proto}
		sh.send(m, string(req.Method), u, string(req.Host), h, body)
	}
}

// MirrorStream mirrors an HTTP/2 (or net/http) request. A body of known
// length up to maxShadowBody is read first and replaces r.Body, so both
// the main request and the shadow carry it; any other body is not
// mirrored.
func (sh *Shadowing) MirrorStream(mirrors []route.Mirror, r *http.Request) {
	var body []byte
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		if r.ContentLength < 0 || r.ContentLength > maxShadowBody {
			sh.log.Debug("request not mirrored: body not at hand", "content_length", r.ContentLength)
			return
		}
		b, err := io.ReadAll(io.LimitReader(r.Body, r.ContentLength))
		if err != nil {
			// The main request fails on its own; the body read so far
			// goes with it.
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), r.Body))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		body = b
	}
	for _, m := range mirrors {
		if !m.Fraction.Hit() {
			continue
		}
		h := r.Header.Clone()
		RemoveHop(h)
		u := &url.URL{Scheme: r.URL.Scheme, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
		sh.send(m, r.Method, u, r.Host, h, body) //nolint:contextcheck // a shadow outlives its request on purpose; the server's context bounds it
	}
}

// send starts one shadow request, unless maxShadows are in flight.
func (sh *Shadowing) send(m route.Mirror, method string, u *url.URL, host string, h http.Header, body []byte) {
	select {
	case sh.slots <- struct{}{}:
	default:
		sh.log.Debug("request not mirrored: too many shadows in flight", "cluster", m.Cluster)
		return
	}
	if !m.NoHostSuffix {
		host = shadowHost(host)
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = nil // don't let the transport add Go's default
	}
	var b []byte
	if len(body) > 0 {
		b = bytes.Clone(body) // body aliases the connection's buffer
	}
	sh.mu.Lock()
	if sh.closed {
		sh.mu.Unlock()
		<-sh.slots
		return
	}
	sh.wg.Add(1)
	sh.mu.Unlock()
	go func() {
		defer sh.wg.Done()
		defer func() { <-sh.slots }()
		sh.shadow(m.Cluster, method, u, host, h, b)
	}()
}

func (sh *Shadowing) shadow(clusterName, method string, u *url.URL, host string, h http.Header, body []byte) {
	cl := sh.clusters.Get(clusterName)
	if cl == nil {
		sh.log.Debug("shadow dropped: no cluster", "cluster", clusterName)
		return
	}
	ep, err := cl.Pick(netip.AddrPort{})
	if err != nil {
		sh.log.Debug("shadow dropped: no healthy endpoint", "cluster", clusterName)
		return
	}
	ctx, cancel := context.WithTimeout(sh.ctx, shadowTimeout)
	defer cancel()
	// u.Scheme is the request's :scheme, for an HTTP/2 cluster
	// (cluster.RoundTrip); an HTTP/1.1 one ignores it.
	u.Host = ep.Address
	if u.Scheme != "https" {
		u.Scheme = "http"
	}
	req := (&http.Request{
		Method:     method,
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Host:       host,
	}).WithContext(ctx)
	if len(body) > 0 {
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
	}
	resp, err := cl.RoundTrip(req, ep)
	if err != nil {
		sh.log.Debug("shadow request failed", "cluster", clusterName, "error", err)
		return
	}
	cl.Stats.AddResponse(resp.StatusCode)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxShadowResponse))
	resp.Body.Close()
}
