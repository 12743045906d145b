package hcm

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// headBackend answers /bighead with a 70 KiB response header, /widehead
// and /fithead with 80 and 50 of 1 KiB, /manyheads with 150 response
// headers, anything else with "ok"; HTTP/1.1 and h2c.
func headBackend(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/bighead":
			w.Header().Set("X-Big", strings.Repeat("b", 70<<10))
		case "/widehead", "/fithead":
			n := 80
			if r.URL.Path == "/fithead" {
				n = 50
			}
			for i := range n {
				w.Header().Set("X-W"+strconv.Itoa(i), strings.Repeat("w", 1<<10))
			}
		case "/manyheads":
			for i := range 150 {
				w.Header().Set("X-H"+strconv.Itoa(i), "v")
			}
		}
		_, _ = io.WriteString(w, "ok") // a handler's write fails only when the client has gone
	}), Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestHeadLimitsEveryCodec checks each HCM head limit on each codec and
// upstream protocol: a request head past max_headers_count or
// max_request_headers_kb gets 431 on HTTP/1.1 and a stream reset on
// HTTP/2 (Envoy's codecs); an upstream response head past 100 fields or
// 60 KiB gets 502 UPE.
func TestHeadLimitsEveryCodec(t *testing.T) {
	be := headBackend(t)
	limits := func(h *hcmv3.HttpConnectionManager) {
		h.MaxRequestHeadersKb = wrapperspb.UInt32(8)
		h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{MaxHeadersCount: wrapperspb.UInt32(20)}
	}
	type path struct {
		name     string
		codec    Codec
		h2       bool // downstream HTTP/2
		upstream string
	}
	paths := []path{
		{"strait/h1-h1", CodecStrait, false, "http1"},
		{"strait/h1-h2", CodecStrait, false, "http2"},
		{"h2-h1", CodecStrait, true, "http1"},
		{"h2-h2", CodecStrait, true, "http2"},
	}
	header := func(n, size int) http.Header {
		h := http.Header{}
		for i := range n {
			h.Set("X-R"+strconv.Itoa(i), "v")
		}
		if size > 0 {
			h.Set("X-Pad", strings.Repeat("p", size))
		}
		return h
	}
	cases := []struct {
		name   string
		path   string
		header http.Header
		want   int    // 0: the HTTP/2 stream is reset (HTTP/1.1: 431)
		flags  string // response flags of a local reply
	}{
		{"few headers", "/", header(10, 0), 200, ""},
		{"too many headers", "/", header(30, 0), 0, ""},
		{"head under max_request_headers_kb", "/", nil, 200, ""},
		{"head over max_request_headers_kb", "/", header(0, 8300), 0, ""},
		{"response head too large", "/bighead", nil, 502, "UPE"},
		{"too many response headers", "/manyheads", nil, 502, "UPE"},
		{"response head of 80 KiB fields", "/widehead", nil, 502, "UPE"},
		{"response head of 50 KiB", "/fithead", nil, 200, ""},
	}
	cases[2].header = header(0, 7<<10)
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			cl := staticCluster("be", be)
			if p.upstream == "http2" {
				cl = h2Cluster(t, "be", be)
			}
			proxy := startH2Proxy(t, p.codec, []*routev3.Route{prefixRoute("/", "be")}, limits, []*clusterv3.Cluster{cl}...)
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxResponseHeaderBytes: 1 << 20}}
			if p.h2 {
				client = h2cClient()
			}
			defer client.CloseIdleConnections()
			for _, tc := range cases {
				req, _ := http.NewRequest("GET", "http://"+proxy+tc.path, nil)
				for k, v := range tc.header {
					req.Header[k] = v
				}
				resp, err := client.Do(req)
				want := tc.want
				if want == 0 && !p.h2 {
					want = http.StatusRequestHeaderFieldsTooLarge
				}
				if want == 0 {
					var se http2.StreamError
					if err == nil {
						resp.Body.Close()
						t.Errorf("%s: %s, want a stream reset", tc.name, resp.Status)
					} else if !errors.As(err, &se) || se.Code != http2.ErrCodeInternal {
						t.Errorf("%s: %v, want a stream reset (INTERNAL_ERROR)", tc.name, err)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: %v", tc.name, err)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("%s: %s, want %d", tc.name, resp.Status, want)
				}
				if got := resp.Header.Get("X-Strait-Response-Flags"); got != tc.flags {
					t.Errorf("%s: response flags %q, want %q", tc.name, got, tc.flags)
				}
			}
		})
	}
}
