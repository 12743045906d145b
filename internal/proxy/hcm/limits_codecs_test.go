package hcm

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// This file runs every HCM limit and timeout against every way a request
// reaches the HCM (limitsWires), with real sockets: a raw HTTP/1.1 client
// (in clear text, over TLS, with an h2c Upgrade that is served as
// HTTP/1.1, and a WebSocket upgrade) and a raw HTTP/2 client (h2c with
// prior knowledge, and over TLS with ALPN "h2"). Each row says what Envoy
// does; the expectation is the same for every codec of a protocol.

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
