package hcm

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// This file runs every HCM limit and timeout against every way a request
// reaches the HCM (limitsWires), with real sockets: a raw HTTP/1.1 client
// (in clear text, over TLS, with an h2c Upgrade that is served as
// HTTP/1.1, and a WebSocket upgrade) and a raw HTTP/2 client (h2c with
// prior knowledge, and over TLS with ALPN "h2"). Each row says what Envoy
// does; the expectation is the same for every codec of a protocol.

// limitsWire is one way of reaching the HCM.
type limitsWire struct {
	name      string
	tls       bool
	h2        bool
	upgrade   string // extra HTTP/1.1 request fields of an upgrade
	websocket bool   // requests go to the WebSocket upstream (/ws/...)
}

var limitsWires = []limitsWire{
	{name: "h1"},
	{name: "h1-tls", tls: true},
	{name: "h2c", h2: true},
	{name: "h2-tls-alpn", tls: true, h2: true},
	{name: "h2c-upgrade", upgrade: "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"},
	{name: "websocket", upgrade: "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", websocket: true},
}

// limitsBackend answers /hang only when the request ends (after 30 s at
// most), /stall with its head and part of its body and then nothing,
// /slow after 500 ms, /big with a 70 KiB response header and
// anything else "ok"; HTTP/1.1 and h2c.
func limitsBackend(t *testing.T) *limitsUpstream {
	t.Helper()
	up := &limitsUpstream{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/hang"):
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			return
		case strings.HasSuffix(r.URL.Path, "/stall"):
			w.Header().Set("Content-Length", "100")
			_, _ = io.WriteString(w, "part")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			return
		case strings.HasSuffix(r.URL.Path, "/slow"):
			up.seen.Store(r.Header.Get("X-Slow-Id"), true)
			time.Sleep(500 * time.Millisecond)
		case strings.HasSuffix(r.URL.Path, "/big"):
			w.Header().Set("X-Big", strings.Repeat("b", 70<<10))
		}
		_, _ = io.WriteString(w, "ok")
	}), Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	up.addr = ln.Addr().String()
	return up
}

// limitsUpstream is limitsBackend: its address, and the X-Slow-Id of each
// /slow request that arrived.
type limitsUpstream struct {
	addr string
	seen sync.Map
}

// limitsProxy is one HCM served on a clear-text and a TLS listener, under
// one drain.
type limitsProxy struct {
	plain, tls string
	tlsConf    *tls.Config // the client's
	drain      *Drain
	upstream   *limitsUpstream
}

func startLimitsProxy(t *testing.T, be *limitsUpstream, ws string, mod func(h *hcmv3.HttpConnectionManager), routeMod func(r *routev3.RouteAction)) *limitsProxy {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	cm := cluster.NewManager(log, stats.New())
	if err := cm.AddStatic([]*clusterv3.Cluster{staticCluster("be", be.addr), staticCluster("ws", ws)}); err != nil {
		t.Fatal(err)
	}
	wsRoute, beRoute := prefixRoute("/ws/", "ws"), prefixRoute("/", "be")
	if routeMod != nil {
		routeMod(wsRoute.GetRoute())
		routeMod(beRoute.GetRoute())
	}
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: "limits",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{wsRoute, beRoute}}}}},
		HttpFilters:    []*hcmv3.HttpFilter{{Name: routerFilter}},
		UpgradeConfigs: []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket"}},
	}
	if mod != nil {
		mod(h)
	}
	f, err := Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Options{Logger: log, Clusters: cm})
	d := NewDrain()
	serverTLS, clientTLS := mutualTLS(t, "spiffe://cluster.local/ns/default/sa/client")
	serverTLS = serverTLS.Clone()
	serverTLS.ClientAuth = tls.NoClientCert
	serverTLS.NextProtos = []string{"h2", "http/1.1"}
	clientTLS = clientTLS.Clone()
	clientTLS.Certificates = nil
	p := &limitsProxy{tlsConf: clientTLS, drain: d, upstream: be}
	serve := func(withTLS bool) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				if withTLS {
					tc := tls.Server(c, serverTLS)
					tc.SetDeadline(time.Now().Add(10 * time.Second))
					if err := tc.Handshake(); err != nil {
						c.Close()
						continue
					}
					tc.SetDeadline(time.Time{})
					c = tc
				}
				s.ServeConnDrain(c, f, netip.MustParseAddrPort(ln.Addr().String()), cluster.OriginalSource{}, d)
			}
		}()
		return ln.Addr().String()
	}
	p.plain, p.tls = serve(false), serve(true)
	t.Cleanup(func() { s.Close() })
	return p
}

// limitsClient is a raw client of one wire on one connection.
type limitsClient struct {
	t    *testing.T
	w    limitsWire
	c    net.Conn
	br   *bufio.Reader
	fr   *http2.Framer // HTTP/2
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	next uint32 // the next HTTP/2 stream id
	// midBlock: a header block was left open (partialHead), so no other
	// frame may be sent (RFC 9113 §6.10).
	midBlock bool
}

func dialLimits(t *testing.T, p *limitsProxy, w limitsWire) *limitsClient {
	t.Helper()
	var c net.Conn
	var err error
	if w.tls {
		conf := p.tlsConf.Clone()
		conf.NextProtos = []string{"http/1.1"}
		if w.h2 {
			conf.NextProtos = []string{"h2"}
		}
		c, err = tls.Dial("tcp", p.tls, conf)
	} else {
		c, err = net.Dial("tcp", p.plain)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(8 * time.Second))
	lc := &limitsClient{t: t, w: w, c: c, br: bufio.NewReader(c), next: 1}
	if w.h2 {
		if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
			t.Fatal(err)
		}
		lc.fr = http2.NewFramer(c, lc.br)
		lc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		lc.fr.MaxHeaderListSize = 1 << 20
		lc.enc = hpack.NewEncoder(&lc.hbuf)
		if err := lc.fr.WriteSettings(); err != nil {
			t.Fatal(err)
		}
	}
	return lc
}

// path is p on this wire's upstream.
func (c *limitsClient) path(p string) string {
	if c.w.websocket {
		if p == "/hang" {
			p = "/silent" // upgradeBackend's: it never answers
		}
		return "/ws" + p
	}
	return p
}

// request sends a request for path with extra header fields; a body of
// bodyLen bytes is announced, and only its first half sent.
func (c *limitsClient) request(path string, extra [][2]string, bodyLen int) {
	c.t.Helper()
	path = c.path(path)
	if c.w.h2 {
		c.hbuf.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "limits"}, {":path", path}} {
			_ = c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		for _, f := range extra {
			_ = c.enc.WriteField(hpack.HeaderField{Name: strings.ToLower(f[0]), Value: f[1]})
		}
		id := c.next
		c.next += 2
		if err := c.writeHeaders(id, c.hbuf.Bytes(), bodyLen == 0, true); err != nil {
			c.t.Fatal(err)
		}
		if bodyLen > 0 {
			if err := c.fr.WriteData(id, false, make([]byte, bodyLen/2)); err != nil {
				c.t.Fatal(err)
			}
		}
		return
	}
	var b strings.Builder
	b.WriteString("GET " + path + " HTTP/1.1\r\nHost: limits\r\n" + c.w.upgrade)
	for _, f := range extra {
		b.WriteString(f[0] + ": " + f[1] + "\r\n")
	}
	if bodyLen > 0 {
		b.WriteString("Content-Length: " + strconv.Itoa(bodyLen) + "\r\n\r\n" + strings.Repeat("x", bodyLen/2))
	} else {
		b.WriteString("\r\n")
	}
	if _, err := io.WriteString(c.c, b.String()); err != nil {
		c.t.Fatal(err)
	}
}

// writeHeaders writes a HEADERS frame, splitting a large block into
// CONTINUATION frames of at most 16 KiB.
func (c *limitsClient) writeHeaders(id uint32, block []byte, endStream, endHeaders bool) error {
	const max = 16 << 10
	first := block
	if len(first) > max {
		first = block[:max]
	}
	rest := block[len(first):]
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: endStream, EndHeaders: endHeaders && len(rest) == 0}); err != nil {
		return err
	}
	for len(rest) > 0 {
		n := min(len(rest), max)
		if err := c.fr.WriteContinuation(id, endHeaders && n == len(rest), rest[:n]); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return nil
}

// partialHead sends the beginning of a request head and no more.
func (c *limitsClient) partialHead() {
	c.t.Helper()
	if c.w.h2 {
		c.hbuf.Reset()
		_ = c.enc.WriteField(hpack.HeaderField{Name: ":method", Value: "GET"})
		id := c.next
		c.next += 2
		if err := c.writeHeaders(id, c.hbuf.Bytes(), true, false); err != nil {
			c.t.Fatal(err)
		}
		c.midBlock = true
		return
	}
	if _, err := io.WriteString(c.c, "GET "+c.path("/ok")+" HTTP/1.1\r\nHost: limits\r\n"+c.w.upgrade+"X-Partial: "); err != nil {
		c.t.Fatal(err)
	}
}

// limitsOutcome is what the client saw of one request.
type limitsOutcome struct {
	status    int
	flags     string
	connClose bool // HTTP/1.1: "connection: close"
	reset     bool // HTTP/2: RST_STREAM (before a response, or cutting one: truncated)
	truncated bool // the response started and was cut short
	goAway    bool // HTTP/2: GOAWAY before the response
	closed    bool // the connection closed before a response
}

func (o limitsOutcome) String() string {
	switch {
	case o.status != 0:
		s := strconv.Itoa(o.status)
		if o.flags != "" {
			s += " " + o.flags
		}
		if o.connClose {
			s += " connection: close"
		}
		if o.truncated {
			s += " cut short"
		}
		return s
	case o.reset:
		return "stream reset"
	case o.goAway:
		return "GOAWAY"
	case o.closed:
		return "connection closed"
	}
	return "nothing"
}

// response reads the outcome of the last request (its body is read and
// dropped).
func (c *limitsClient) response() limitsOutcome {
	c.t.Helper()
	if !c.w.h2 {
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil {
			return limitsOutcome{closed: !isTimeout(err)}
		}
		var truncated bool
		if resp.StatusCode != http.StatusSwitchingProtocols {
			_, err := io.Copy(io.Discard, resp.Body)
			truncated = err != nil && !isTimeout(err)
		}
		resp.Body.Close()
		return limitsOutcome{status: resp.StatusCode, flags: resp.Header.Get("X-Strait-Response-Flags"), connClose: resp.Close, truncated: truncated}
	}
	id := c.next - 2
	var out limitsOutcome
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			if out.status != 0 || out.goAway {
				return out
			}
			return limitsOutcome{closed: !isTimeout(err)}
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() && !c.midBlock {
				_ = c.fr.WriteSettingsAck() // a failed write shows as the next read's error
			}
		case *http2.GoAwayFrame:
			if f.LastStreamID < id {
				return limitsOutcome{goAway: true}
			}
			out.goAway = true
		case *http2.RSTStreamFrame:
			if f.StreamID == id && out.status == 0 {
				return limitsOutcome{reset: true}
			}
			if f.StreamID == id {
				out.reset, out.truncated = true, true
				return out
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID != id {
				continue
			}
			if st, err := strconv.Atoi(f.PseudoValue("status")); err == nil && st >= 200 {
				out.status = st
				for _, hf := range f.RegularFields() {
					if hf.Name == "x-strait-response-flags" {
						out.flags = hf.Value
					}
				}
			}
			if f.StreamEnded() {
				return out
			}
		case *http2.DataFrame:
			if f.StreamID == id && f.StreamEnded() {
				return out
			}
		}
	}
}

// ends waits (bounded) for the server to end the connection: HTTP/1.1
// closes it, HTTP/2 sends GOAWAY (and closes once no stream is open).
func (c *limitsClient) ends(within time.Duration) bool {
	c.t.Helper()
	c.c.SetReadDeadline(time.Now().Add(within))
	if !c.w.h2 {
		_, err := c.br.ReadByte()
		return err != nil && !isTimeout(err)
	}
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return !isTimeout(err)
		}
		if _, ok := f.(*http2.GoAwayFrame); ok {
			return true
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

const limitsTimeout = 300 * time.Millisecond

// limitsRow is one limit or timeout: how to configure it, what to do, and
// what Envoy answers on HTTP/1.1 and on HTTP/2.
type limitsRow struct {
	name     string
	envoy    string // Envoy's behaviour, and where it is decided
	hcm      func(h *hcmv3.HttpConnectionManager)
	route    func(r *routev3.RouteAction)
	wsToo    bool // the row applies to a WebSocket upgrade request
	exchange func(c *limitsClient, p *limitsProxy) limitsOutcome
	h1, h2   func(o limitsOutcome) bool
	// then, when set, runs after the exchange: what happens to the
	// connection.
	then func(t *testing.T, c *limitsClient, p *limitsProxy)
}

func limitsWant(code int, flags string) func(o limitsOutcome) bool {
	return func(o limitsOutcome) bool { return o.status == code && (flags == "" || o.flags == flags) }
}

func limitsReset(o limitsOutcome) bool { return o.reset }

func okThenEnds(t *testing.T, c *limitsClient, _ *limitsProxy) {
	t.Helper()
	if !c.ends(10 * time.Second) {
		t.Fatal("the connection did not end")
	}
}

func limitsRows() []limitsRow {
	commonOpts := func(set func(o *corev3.HttpProtocolOptions)) func(h *hcmv3.HttpConnectionManager) {
		return func(h *hcmv3.HttpConnectionManager) {
			if h.CommonHttpProtocolOptions == nil {
				h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{}
			}
			set(h.CommonHttpProtocolOptions)
		}
	}
	get := func(path string) func(c *limitsClient, _ *limitsProxy) limitsOutcome {
		return func(c *limitsClient, _ *limitsProxy) limitsOutcome { c.request(path, nil, 0); return c.response() }
	}
	return []limitsRow{{
		name:  "max_request_headers_kb",
		envoy: "HTTP/1.1: 431 (codec_impl.cc checkMaxHeadersSize); HTTP/2: the stream is reset (http2 codec_impl.cc saveHeader)",
		hcm:   func(h *hcmv3.HttpConnectionManager) { h.MaxRequestHeadersKb = wrapperspb.UInt32(8) },
		wsToo: true,
		exchange: func(c *limitsClient, _ *limitsProxy) limitsOutcome {
			c.request("/ok", [][2]string{{"X-Pad", strings.Repeat("p", 9<<10)}}, 0)
			return c.response()
		},
		h1: limitsWant(431, ""), h2: limitsReset,
	}, {
		name:  "max_request_headers_kb 1, a head in one read",
		envoy: "HTTP/1.1: 431; HTTP/2: the stream is reset (the whole head counts, however it arrived)",
		hcm:   func(h *hcmv3.HttpConnectionManager) { h.MaxRequestHeadersKb = wrapperspb.UInt32(1) },
		wsToo: true,
		exchange: func(c *limitsClient, _ *limitsProxy) limitsOutcome {
			c.request("/ok", [][2]string{{"X-Pad", strings.Repeat("p", 2<<10)}}, 0)
			return c.response()
		},
		h1: limitsWant(431, ""), h2: limitsReset,
	}, {
		name: "max_request_headers_kb default (60), a 70 KiB head",
		envoy: "HTTP/1.1: 431; HTTP/2: the stream is reset. Strait's HTTP/2 ends the connection instead " +
			"(GOAWAY PROTOCOL_ERROR) when a header block passes x/net's header list bound by a whole " +
			"CONTINUATION frame (x/net's guard against CONTINUATION floods, Framer.readMetaFrame); " +
			"the request is refused either way",
		wsToo: true,
		exchange: func(c *limitsClient, _ *limitsProxy) limitsOutcome {
			// 70 fields of 1 KiB: under max_headers_count, over the size.
			// (One field longer than the whole limit makes x/net's HPACK
			// decoder end the connection, COMPRESSION_ERROR, where
			// Envoy resets the stream.)
			var extra [][2]string
			for i := range 70 {
				extra = append(extra, [2]string{"X-P" + strconv.Itoa(i), strings.Repeat("p", 1<<10)})
			}
			c.request("/ok", extra, 0)
			return c.response()
		},
		h1: limitsWant(431, ""), h2: func(o limitsOutcome) bool { return o.reset || o.goAway },
	}, {
		name:  "max_headers_count",
		envoy: "HTTP/1.1: 431; HTTP/2: the stream is reset",
		hcm:   commonOpts(func(o *corev3.HttpProtocolOptions) { o.MaxHeadersCount = wrapperspb.UInt32(20) }),
		wsToo: true,
		exchange: func(c *limitsClient, _ *limitsProxy) limitsOutcome {
			var extra [][2]string
			for i := range 30 {
				extra = append(extra, [2]string{"X-N" + strconv.Itoa(i), "v"})
			}
			c.request("/ok", extra, 0)
			return c.response()
		},
		h1: limitsWant(431, ""), h2: limitsReset,
	}, {
		name:     "response head past 60 KiB",
		envoy:    "502, response flag UPE (the upstream codec's max_response_headers_kb, default 60)",
		exchange: get("/big"),
		h1:       limitsWant(502, "UPE"), h2: limitsWant(502, "UPE"),
	}, {
		name:  "request_timeout",
		envoy: "408 once the whole request has not arrived in time (ConnectionManagerImpl::ActiveStream::onRequestTimeout), every codec",
		hcm: func(h *hcmv3.HttpConnectionManager) {
			h.RequestTimeout = durationpb.New(limitsTimeout)
			h.StreamIdleTimeout = durationpb.New(0)
		},
		exchange: func(c *limitsClient, _ *limitsProxy) limitsOutcome { c.request("/ok", nil, 100); return c.response() },
		h1:       limitsWant(408, ""), h2: limitsWant(408, ""),
	}, {
		name:  "request_headers_timeout",
		envoy: "HTTP/1.1: 408 once the head has not arrived in time (onRequestHeaderTimeout); HTTP/2: the connection ends (no stream exists until the header block ends)",
		hcm: func(h *hcmv3.HttpConnectionManager) {
			h.RequestHeadersTimeout = durationpb.New(limitsTimeout)
			h.StreamIdleTimeout = durationpb.New(0)
		},
		wsToo:    true,
		exchange: func(c *limitsClient, _ *limitsProxy) limitsOutcome { c.partialHead(); return c.response() },
		h1:       limitsWant(408, ""),
		h2:       func(o limitsOutcome) bool { return o.goAway || o.closed || o.status == 408 || o.reset },
	}, {
		name:     "stream_idle_timeout",
		envoy:    "408 with response flag SI before the response starts (onIdleTimeout)",
		hcm:      func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = durationpb.New(limitsTimeout) },
		wsToo:    true,
		exchange: get("/hang"),
		h1:       limitsWant(408, "SI"), h2: limitsWant(408, "SI"),
	}, {
		name:     "route idle_timeout with stream_idle_timeout 0",
		envoy:    "the route's idle_timeout replaces the HCM's, also when that is disabled: 408 SI",
		hcm:      func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = durationpb.New(0) },
		route:    func(r *routev3.RouteAction) { r.IdleTimeout = durationpb.New(limitsTimeout) },
		wsToo:    true,
		exchange: get("/hang"),
		h1:       limitsWant(408, "SI"), h2: limitsWant(408, "SI"),
	}, {
		name:     "stream_idle_timeout after the response started",
		envoy:    "the response is cut short: HTTP/1.1 closes the connection, HTTP/2 resets the stream (sendLocalReply once the response started)",
		hcm:      func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = durationpb.New(limitsTimeout) },
		exchange: get("/stall"),
		h1:       func(o limitsOutcome) bool { return o.status == 200 && o.truncated },
		h2:       limitsReset, // with or without the head: h2.go holds a known-length response's head until its body is sent
	}, {
		name:     "route timeout after the response started",
		envoy:    "the route timeout runs until the response is complete (Router::Filter::onResponseTimeout): the response is cut short",
		hcm:      func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = durationpb.New(0) },
		route:    func(r *routev3.RouteAction) { r.Timeout = durationpb.New(limitsTimeout) },
		exchange: get("/stall"),
		h1:       func(o limitsOutcome) bool { return o.status == 200 && o.truncated },
		h2:       limitsReset, // with or without the head: h2.go holds a known-length response's head until its body is sent
	}, {
		name:     "route timeout",
		envoy:    "504 \"upstream request timeout\", response flag UT (Router::Filter::onResponseTimeout)",
		route:    func(r *routev3.RouteAction) { r.Timeout = durationpb.New(limitsTimeout) },
		wsToo:    true,
		exchange: get("/hang"),
		h1:       limitsWant(504, "UT"), h2: limitsWant(504, "UT"),
	}, {
		name:     "idle_timeout",
		envoy:    "a connection with no stream for idle_timeout ends: HTTP/1.1 closed, HTTP/2 GOAWAY (onIdleTimeout, codec goAway)",
		hcm:      commonOpts(func(o *corev3.HttpProtocolOptions) { o.IdleTimeout = durationpb.New(limitsTimeout) }),
		exchange: get("/ok"),
		h1:       limitsWant(200, ""), h2: limitsWant(200, ""),
		then: okThenEnds,
	}, {
		name:     "max_connection_duration",
		envoy:    "the connection ends after max_connection_duration: HTTP/1.1 closed once idle, HTTP/2 GOAWAY (onConnectionDurationTimeout)",
		hcm:      commonOpts(func(o *corev3.HttpProtocolOptions) { o.MaxConnectionDuration = durationpb.New(limitsTimeout) }),
		exchange: get("/ok"),
		h1:       limitsWant(200, ""), h2: limitsWant(200, ""),
		then: okThenEnds,
	}, {
		name:     "max_requests_per_connection",
		envoy:    "the last request's response says connection: close (HTTP/1.1) or the connection gets GOAWAY (HTTP/2) (ActiveStream ctor, startDrainSequence)",
		hcm:      commonOpts(func(o *corev3.HttpProtocolOptions) { o.MaxRequestsPerConnection = wrapperspb.UInt32(2) }),
		exchange: get("/ok"),
		h1:       limitsWant(200, ""), h2: limitsWant(200, ""),
		then: func(t *testing.T, c *limitsClient, _ *limitsProxy) {
			c.request("/ok", nil, 0)
			o := c.response()
			if o.status != 200 || !c.w.h2 && !o.connClose {
				t.Fatalf("second request: %v, want 200 with connection: close (HTTP/1.1)", o)
			}
			if !c.w.h2 || !o.goAway {
				okThenEnds(t, c, nil)
			}
		},
	}, {
		name:  "drain during a request",
		envoy: "the response in progress is completed, with connection: close on HTTP/1.1 and after a GOAWAY on HTTP/2; then the connection ends",
		exchange: func(c *limitsClient, p *limitsProxy) limitsOutcome {
			id := c.w.name
			c.request("/slow", [][2]string{{"X-Slow-Id", id}}, 0)
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
				if _, ok := p.upstream.seen.Load(id); ok {
					break // the request is in flight
				}
			}
			p.drain.Start()
			return c.response()
		},
		h1: func(o limitsOutcome) bool { return o.status == 200 && o.connClose },
		h2: func(o limitsOutcome) bool { return o.status == 200 && o.goAway },
		then: func(t *testing.T, c *limitsClient, _ *limitsProxy) {
			if c.w.h2 {
				return // the GOAWAY was seen
			}
			okThenEnds(t, c, nil)
		},
	}, {
		name:     "drain",
		envoy:    "a drain closes an idle HTTP/1.1 connection and sends GOAWAY on HTTP/2 (drain_strategy immediate)",
		exchange: get("/ok"),
		h1:       limitsWant(200, ""), h2: limitsWant(200, ""),
		then: func(t *testing.T, c *limitsClient, p *limitsProxy) {
			p.drain.Start()
			okThenEnds(t, c, nil)
		},
	}}
}

// TestLimitsEveryCodec: every HCM limit and timeout on every codec.
func TestLimitsEveryCodec(t *testing.T) {
	be, ws := limitsBackend(t), upgradeBackend(t)
	for _, row := range limitsRows() {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			for _, w := range limitsWires {
				if w.websocket && !row.wsToo {
					continue
				}
				t.Run(w.name, func(t *testing.T) {
					t.Parallel()
					p := startLimitsProxy(t, be, ws, row.hcm, row.route)
					c := dialLimits(t, p, w)
					got := row.exchange(c, p)
					want := row.h1
					if w.h2 {
						want = row.h2
					}
					if !want(got) {
						t.Fatalf("got %v; Envoy: %s", got, row.envoy)
					}
					if row.then != nil {
						row.then(t, c, p)
					}
				})
			}
		})
	}
}

// TestLimitsUpgrade: once upgraded, a WebSocket is not cut by the route
// timeout (Envoy arms the route's response timeout when the downstream
// request ends, Router::Filter::onRequestComplete, which an upgraded
// stream does not reach while it is open); the stream idle timeout still
// ends a silent tunnel.
func TestLimitsUpgrade(t *testing.T) {
	be, ws := limitsBackend(t), upgradeBackend(t)
	p := startLimitsProxy(t, be, ws, nil, func(r *routev3.RouteAction) { r.Timeout = durationpb.New(limitsTimeout) })
	for _, w := range limitsWires {
		if !w.websocket {
			continue
		}
		c := dialLimits(t, p, w)
		c.request("/echo", nil, 0)
		if o := c.response(); o.status != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %v, want 101", o)
		}
		buf := make([]byte, 1)
		end := time.Now().Add(4 * limitsTimeout)
		for time.Now().Before(end) {
			if _, err := c.c.Write([]byte("e")); err != nil {
				t.Fatalf("the tunnel ended after the route timeout: %v", err)
			}
			if _, err := io.ReadFull(c.br, buf); err != nil {
				t.Fatalf("the tunnel ended after the route timeout: %v", err)
			}
			time.Sleep(limitsTimeout / 4)
		}
	}
}

// TestLimitsRefused: an HCM limit strait-proxy does not enforce on every
// codec is refused at load time, naming the field.
func TestLimitsRefused(t *testing.T) {
	for _, tc := range []struct {
		field string
		mod   func(h *hcmv3.HttpConnectionManager)
	}{
		{"max_stream_duration", func(h *hcmv3.HttpConnectionManager) {
			h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{MaxStreamDuration: durationpb.New(time.Second)}
		}},
		{"max_connection_duration_jitter", func(h *hcmv3.HttpConnectionManager) {
			h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{MaxConnectionDurationJitter: &typev3.Percent{Value: 10}}
		}},
		{"max_response_headers_kb", func(h *hcmv3.HttpConnectionManager) {
			h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{MaxResponseHeadersKb: wrapperspb.UInt32(100)}
		}},
		{"headers_with_underscores_action", func(h *hcmv3.HttpConnectionManager) {
			h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{HeadersWithUnderscoresAction: corev3.HttpProtocolOptions_REJECT_REQUEST}
		}},
		{"stream_flush_timeout", func(h *hcmv3.HttpConnectionManager) { h.StreamFlushTimeout = durationpb.New(time.Second) }},
		{"drain_timeout", func(h *hcmv3.HttpConnectionManager) { h.DrainTimeout = durationpb.New(time.Second) }},
		{"http1_safe_max_connection_duration", func(h *hcmv3.HttpConnectionManager) { h.Http1SafeMaxConnectionDuration = true }},
	} {
		_, err := Build(hcmConfig(tc.mod), nil)
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: got %v, want an error naming it", tc.field, err)
		}
	}
}

// BenchmarkProxyH2 is one h2c stream through the HCM to an HTTP/1.1
// upstream, under Envoy's default limits (the stream guard of
// h2limits.go on every stream); allocs/op counts the client's and the
// upstream's too, so read it against itself.
func BenchmarkProxyH2(b *testing.B) {
	be := rawBackend(b)
	addr := startH2Proxy(b, CodecStrait, []*routev3.Route{prefixRoute("/", "be")}, nil, staticCluster("be", be))
	c := h2cClient()
	url := "http://" + addr + "/bench"
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// TestLimitsGRPCForm: a gRPC stream that runs into a stream timeout gets
// the local reply in gRPC's trailers-only form (HTTP 200, grpc-status from
// Envoy's HTTP-to-gRPC mapping of 408: UNKNOWN), with the response flag.
func TestLimitsGRPCForm(t *testing.T) {
	be, ws := limitsBackend(t), upgradeBackend(t)
	for _, tc := range []struct {
		name  string
		hcm   func(h *hcmv3.HttpConnectionManager)
		flags string
	}{
		{"stream_idle_timeout", func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = durationpb.New(limitsTimeout) }, "SI"},
		{"request_timeout", func(h *hcmv3.HttpConnectionManager) {
			h.RequestTimeout = durationpb.New(limitsTimeout)
			h.StreamIdleTimeout = durationpb.New(0)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startLimitsProxy(t, be, ws, tc.hcm, nil)
			pr, pw := io.Pipe() // a request body that never ends
			defer pw.Close()
			req, _ := http.NewRequest(http.MethodPost, "http://"+p.plain+"/hang", pr)
			req.Header.Set("Content-Type", "application/grpc")
			resp, err := h2cClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("Grpc-Status") != "2" || resp.Header.Get("X-Strait-Response-Flags") != tc.flags {
				t.Fatalf("got %d grpc-status %q flags %q; want 200, grpc-status 2 (UNKNOWN, Envoy's mapping of 408), flags %q",
					resp.StatusCode, resp.Header.Get("Grpc-Status"), resp.Header.Get("X-Strait-Response-Flags"), tc.flags)
			}
		})
	}
}
