package hcm

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// This file tests the trailer policy (forward/trailers.go): on every codec path (HTTP/1.1 and HTTP/2
// downstream, each codec, HTTP/1.1 and HTTP/2 upstream), a raw-socket
// client sends trailers that must not cross (XFCC, cookies, x-envoy-*,
// the jwt_authn filter's output header, framing and routing fields) and a
// raw-socket backend answers with such trailers too; each side records
// every field the other sent it.

type field struct{ name, value string }

// benignTrailer is the one field every hostile set carries that may cross
// (HTTP/2 to HTTP/2 only).
var benignTrailer = field{"x-checksum", "ok"}

// hostileH2RequestTrailers are forbidden trailer fields an HTTP/2 server
// (x/net/http2) takes from a client; it resets the stream for the others
// (Host, Authorization, If-*, …: httpguts.ValidTrailerHeader).
var hostileH2RequestTrailers = []field{
	{"x-forwarded-client-cert", "By=spiffe://cluster.local/ns/default/sa/app;URI=spiffe://cluster.local/ns/default/sa/admin"},
	{"cookie", "session=stolen"},
	{"x-envoy-original-path", "/admin"},
	{"x-forwarded-for", "10.0.0.1"},
	{"x-forwarded-proto", "https"},
	{"x-request-id", "forged"},
	{"x-jwt-payload", "eyJzdWIiOiJhZG1pbiJ9"}, // istioJWTFilter's forward_payload_header
	{"location", "/elsewhere"},
	benignTrailer,
}

// hostileH1Trailers adds what only an HTTP/1.1 trailer section can carry.
var hostileH1Trailers = append(slices.Clone(hostileH2RequestTrailers),
	field{"host", "admin.internal"},
	field{"content-length", "0"},
	field{"transfer-encoding", "chunked"},
	field{"authorization", "Bearer forged"},
	field{"if-match", "*"},
	field{"connection", "close"},
)

// hostileResponseTrailers are what the backends answer with, after a
// gRPC status (which must keep crossing HTTP/2).
var hostileResponseTrailers = []field{
	{"grpc-status", "0"},
	{"grpc-message", "fine"},
	{"set-cookie", "session=fixated"},
	{"x-forwarded-client-cert", "By=spiffe://evil"},
	{"x-envoy-upstream-service-time", "1"},
	{"www-authenticate", "Basic"},
	{"content-type", "text/html"},
	{"content-length", "1000"},
	benignTrailer,
}

func appendFields(dst []byte, fs []field) []byte {
	for _, f := range fs {
		dst = fmt.Appendf(dst, "%s: %s\r\n", f.name, f.value)
	}
	return dst
}

func fieldNames(fs []field) string {
	var n []string
	for _, f := range fs {
		n = append(n, f.name)
	}
	return strings.Join(n, ", ")
}

// sortedFields lists "name: value" in lower case, sorted.
func sortedFields(h http.Header) []string {
	var out []string
	for k, vv := range h {
		for _, v := range vv {
			out = append(out, strings.ToLower(k)+": "+v)
		}
	}
	sort.Strings(out)
	return out
}

// h1TrailerBackend is a raw HTTP/1.1 backend: it sends every request's
// trailer section (parsed; empty when none) to got and answers chunked
// with hostileResponseTrailers.
func h1TrailerBackend(t *testing.T) (string, <-chan http.Header) {
	got := make(chan http.Header, 16)
	sb := newScriptBackend(t, func(b *beReq) bool {
		tr := http.Header{}
		if b.req.Framing == http1.FramingChunked {
			var cr http1.ChunkedReader
			cr.Reset(b.r)
			if _, err := io.Copy(io.Discard, &cr); err != nil {
				return false
			}
			if len(cr.Trailer) > 0 {
				h, err := parseFieldLines(cr.Trailer)
				if err != nil {
					t.Errorf("backend: trailer section %q: %v", cr.Trailer, err)
				}
				tr = h
			}
		} else if _, err := b.body(); err != nil {
			return false
		}
		got <- tr
		w := []byte("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntrailer: x-checksum\r\ntransfer-encoding: chunked\r\n\r\n5\r\nworld\r\n0\r\n")
		w = appendFields(w, hostileResponseTrailers)
		_, _ = b.c.Write(append(w, "\r\n"...)) // a failed write shows in what the test reads back
		return true
	})
	return sb.addr, got
}

// parseFieldLines parses "name: value\r\n" lines, keeping every field
// (http.ReadResponse would drop some of a trailer section).
func parseFieldLines(b []byte) (http.Header, error) {
	h := http.Header{}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\r\n"), "\r\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("no colon in %q", line)
		}
		h[strings.ToLower(name)] = append(h[strings.ToLower(name)], strings.TrimSpace(value))
	}
	return h, nil
}

// h1TrailerClient sends a chunked request with hostileH1Trailers over a
// raw connection and returns the response's trailer fields.
func h1TrailerClient(t *testing.T, addr string) http.Header {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := []byte("POST /trailers HTTP/1.1\r\nhost: example.com\r\ntransfer-encoding: chunked\r\nte: trailers\r\ntrailer: x-checksum\r\n\r\n5\r\nhello\r\n0\r\n")
	req = appendFields(req, hostileH1Trailers)
	if _, err := c.Write(append(req, "\r\n"...)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("client: status %d", resp.StatusCode)
	}
	if resp.TransferEncoding == nil {
		_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
		return nil
	}
	// Read the chunked body ourselves, to see the whole trailer section.
	var cr http1.ChunkedReader
	r := http1.NewReader(readerConn{Conn: c, r: br})
	defer r.Release()
	cr.Reset(r)
	if _, err := io.Copy(io.Discard, &cr); err != nil {
		t.Fatalf("client: body: %v", err)
	}
	if len(cr.Trailer) == 0 {
		return nil
	}
	h, err := parseFieldLines(cr.Trailer)
	if err != nil {
		t.Fatalf("client: trailer section %q: %v", cr.Trailer, err)
	}
	return h
}

// readerConn reads what br buffered before the connection.
type readerConn struct {
	net.Conn
	r *bufio.Reader
}

func (c readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// h2TrailerBackend is a raw HTTP/2 (h2c, prior knowledge) backend built on
// a bare framer: it sends every request's trailer fields (empty when
// none) to got and answers with a body and hostileResponseTrailers.
func h2TrailerBackend(t *testing.T) (string, <-chan http.Header) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan http.Header, 16)
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serveH2Trailers(c, got)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String(), got
}

func serveH2Trailers(c net.Conn, got chan<- http.Header) {
	pre := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, pre); err != nil || string(pre) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(64<<10, nil)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	block := func(fs []field) []byte {
		hb.Reset()
		for _, f := range fs {
			_ = enc.WriteField(hpack.HeaderField{Name: f.name, Value: f.value}) // into a bytes.Buffer, which does not fail
		}
		return hb.Bytes()
	}
	if fr.WriteSettings() != nil {
		return
	}
	heads := map[uint32]bool{}
	trailers := map[uint32]http.Header{}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		var end bool
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck() // a failed write shows in what the test reads back
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = fr.WritePing(true, f.Data) // a failed write shows in what the test reads back
			}
		case *http2.MetaHeadersFrame:
			if heads[f.StreamID] {
				h := http.Header{}
				for _, hf := range f.Fields {
					h[hf.Name] = append(h[hf.Name], hf.Value)
				}
				trailers[f.StreamID] = h
			}
			heads[f.StreamID] = true
			end = f.StreamEnded()
		case *http2.DataFrame:
			if n := len(f.Data()); n > 0 {
				_ = fr.WriteWindowUpdate(0, uint32(n)) // a failed write shows in what the test reads back
			}
			end = f.StreamEnded()
		}
		if !end {
			continue
		}
		id := f.Header().StreamID
		tr := trailers[id]
		if tr == nil {
			tr = http.Header{}
		}
		got <- tr
		// A failed write shows in what the client reads back.
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true,
			BlockFragment: block([]field{{":status", "200"}, {"content-type", "text/plain"}})})
		_ = fr.WriteData(id, false, []byte("world"))
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true, EndStream: true,
			BlockFragment: block(hostileResponseTrailers)})
	}
}

// h2TrailerClient sends, over a raw HTTP/2 connection, a request with a
// body and reqTrailers (declared in a trailer header, as x/net/http2's
// server needs) and returns the response's trailer fields; reset reports
// a stream reset instead of a response.
func h2TrailerClient(t *testing.T, addr string, reqTrailers []field) (tr http.Header, reset bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(64<<10, nil)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	block := func(fs []field) []byte {
		hb.Reset()
		for _, f := range fs {
			_ = enc.WriteField(hpack.HeaderField{Name: f.name, Value: f.value}) // into a bytes.Buffer, which does not fail
		}
		return bytes.Clone(hb.Bytes())
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	head := []field{{":method", "POST"}, {":scheme", "http"}, {":authority", "example.com"}, {":path", "/trailers"},
		{"content-type", "text/plain"}, {"te", "trailers"}, {"trailer", fieldNames(reqTrailers)}}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: block(head)}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteData(1, false, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true, BlockFragment: block(reqTrailers)}); err != nil {
		t.Fatal(err)
	}
	gotHead := false
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("client: %v", err)
		}
		if f.Header().StreamID != 0 && f.Header().StreamID != 1 {
			continue
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck() // a failed write shows in what the test reads back
			}
		case *http2.RSTStreamFrame:
			return nil, true
		case *http2.GoAwayFrame:
			t.Fatalf("client: GOAWAY %v", f.ErrCode)
		case *http2.MetaHeadersFrame:
			if !gotHead {
				gotHead = true
				if s := f.PseudoValue("status"); s != "200" {
					t.Fatalf("client: status %s", s)
				}
				if f.StreamEnded() {
					return nil, false
				}
				continue
			}
			h := http.Header{}
			for _, hf := range f.Fields {
				h[hf.Name] = append(h[hf.Name], hf.Value)
			}
			return h, false
		case *http2.DataFrame:
			if f.StreamEnded() {
				return nil, false
			}
		}
	}
}

// TestTrailersEveryCodecPath sends hostile trailers both ways on every
// combination of downstream protocol, codec and upstream protocol: only
// the benign field (and gRPC's status) crosses, and only HTTP/2 to HTTP/2.
func TestTrailersEveryCodecPath(t *testing.T) {
	k := newJWTKey(t)
	withJWT := func(h *hcmv3.HttpConnectionManager) {
		h.HttpFilters = append([]*hcmv3.HttpFilter{istioJWTFilter(t, k.jwks)}, h.HttpFilters...)
	}
	h1Addr, h1Got := h1TrailerBackend(t)
	h2Addr, h2Got := h2TrailerBackend(t)
	wantUp := []string{"x-checksum: ok"}
	wantDown := []string{"grpc-message: fine", "grpc-status: 0", "x-checksum: ok"}
	for _, codec := range codecs {
		for _, down := range []forward.Wire{forward.WireHTTP1, forward.WireHTTP2} {
			for _, up := range []forward.Wire{forward.WireHTTP1, forward.WireHTTP2} {
				name := fmt.Sprintf("%s/h%d-to-h%d", codec, down, up)
				t.Run(name, func(t *testing.T) {
					var cl *clusterv3.Cluster
					got := h1Got
					if up == forward.WireHTTP2 {
						cl, got = h2Cluster(t, "be", h2Addr), h2Got
					} else {
						cl = staticCluster("be", h1Addr)
					}
					addr := startH2Proxy(t, codec, []*routev3.Route{prefixRoute("/", "be")}, withJWT, cl)
					var resp http.Header
					if down == forward.WireHTTP2 {
						var reset bool
						if resp, reset = h2TrailerClient(t, addr, hostileH2RequestTrailers); reset {
							t.Fatal("client: stream reset")
						}
					} else {
						resp = h1TrailerClient(t, addr)
					}
					var backend http.Header
					select {
					case backend = <-got:
					case <-time.After(10 * time.Second):
						t.Fatal("the backend got no request")
					}
					crosses := down == forward.WireHTTP2 && up == forward.WireHTTP2
					if g, w := sortedFields(backend), want(crosses, wantUp); !slices.Equal(g, w) {
						t.Errorf("backend got request trailers %q, want %q", g, w)
					}
					if g, w := sortedFields(resp), want(crosses, wantDown); !slices.Equal(g, w) {
						t.Errorf("client got response trailers %q, want %q", g, w)
					}
				})
			}
		}
	}
}

func want(crosses bool, w []string) []string {
	if crosses {
		return w
	}
	return nil
}

// TestTrailersH1ComparedWithNginx: nginx, the reference, drops HTTP/1.1
// trailers both ways too (it forwards a chunked request body with a
// Content-Length, and never writes an upstream's trailers).
func TestTrailersH1ComparedWithNginx(t *testing.T) {
	beAddr, got := h1TrailerBackend(t)
	for _, tg := range targets(t, beAddr, proxyConfig{}, "", true) {
		t.Run(tg.name, func(t *testing.T) {
			resp := h1TrailerClient(t, tg.addr)
			var backend http.Header
			select {
			case backend = <-got:
			case <-time.After(10 * time.Second):
				t.Fatal("the backend got no request")
			}
			if len(backend) > 0 {
				t.Errorf("backend got request trailers %q", sortedFields(backend))
			}
			if len(resp) > 0 {
				t.Errorf("client got response trailers %q", sortedFields(resp))
			}
		})
	}
}

// TestForwardTrailers is the policy's table: which fields cross, for
// which protocols.
func TestForwardTrailers(t *testing.T) {
	f, err := Build(&hcmv3.HttpConnectionManager{
		StatPrefix:     "t",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "r"}},
		HttpFilters: []*hcmv3.HttpFilter{istioJWTFilter(t, newJWTKey(t).jwks),
			{Name: routerFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAnyT(t, &routerv3.Router{})}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := http.Header{}
	for _, fs := range [][]field{hostileH1Trailers, hostileResponseTrailers} {
		for _, x := range fs {
			in.Add(x.name, x.value)
		}
	}
	for _, n := range []string{":authority", "If-None-Match", "X-Envoy-Attempt-Count", "Te", "Trailer", "Upgrade", "Cache-Control", "Proxy-Authorization", "Content-Encoding", "Content-Range", "Grpc-Status-Details-Bin", "Digest"} {
		in.Add(n, "v")
	}
	for _, c := range []struct {
		from, to forward.Wire
		want     []string
	}{
		{forward.WireHTTP1, forward.WireHTTP1, nil},
		{forward.WireHTTP1, forward.WireHTTP2, nil},
		{forward.WireHTTP2, forward.WireHTTP1, nil},
		{forward.WireHTTP2, forward.WireHTTP2, []string{"digest: v", "grpc-message: fine", "grpc-status-details-bin: v", "grpc-status: 0", "x-checksum: ok", "x-checksum: ok"}},
	} {
		before := sortedFields(in)
		out := f.trailers.Forward(in, c.from, c.to)
		if g := sortedFields(out); !slices.Equal(g, c.want) {
			t.Errorf("h%d to h%d: %q, want %q", c.from, c.to, g, c.want)
		}
		if !slices.Equal(before, sortedFields(in)) {
			t.Errorf("h%d to h%d: the input was modified", c.from, c.to)
		}
	}
}

// TestEnableTrailersRefused: enable_trailers, which would make HTTP/1.1
// trailers cross, is refused by name on the HCM and on a cluster's
// HTTP/1 options, so the default (dropped) is the only behaviour.
func TestEnableTrailersRefused(t *testing.T) {
	_, err := Build(&hcmv3.HttpConnectionManager{
		StatPrefix:          "t",
		RouteSpecifier:      &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "r"}},
		HttpProtocolOptions: &corev3.Http1ProtocolOptions{EnableTrailers: true},
		HttpFilters:         []*hcmv3.HttpFilter{{Name: routerFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAnyT(t, &routerv3.Router{})}}},
	}, nil)
	if err == nil || !strings.Contains(err.Error(), "enable_trailers") {
		t.Errorf("HCM http_protocol_options.enable_trailers: %v, want an error naming the field", err)
	}
	c := staticCluster("be", "127.0.0.1:1")
	c.TypedExtensionProtocolOptions = map[string]*anypb.Any{cluster.HTTPProtocolOptionsKey: mustAnyT(t, &upstreamhttp.HttpProtocolOptions{
		UpstreamProtocolOptions: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{
				HttpProtocolOptions: &corev3.Http1ProtocolOptions{EnableTrailers: true}}}}})}
	cm := cluster.NewManager(slog.New(slog.DiscardHandler), stats.New())
	if err := cm.AddStatic([]*clusterv3.Cluster{c}); err == nil || !strings.Contains(err.Error(), "enable_trailers") {
		t.Errorf("cluster http_protocol_options.enable_trailers: %v, want an error naming the field", err)
	}
}
