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
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// This file is the harness of limits_codecs_test.go: the ways a request
// reaches the HCM (limitsWires), the upstream and the proxy they reach,
// and a raw client for each protocol that reports what the proxy did
// (limitsOutcome: a status and its flags, a reset, a GOAWAY, the
// connection's end).

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
