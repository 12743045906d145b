package hcm

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// countingH1Backend answers 200 "ok" and counts the requests it got.
func countingH1Backend(t *testing.T) (addr string, n *atomic.Int32) {
	n = new(atomic.Int32)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		_, _ = io.WriteString(w, "ok") // a handler's write fails only when the client has gone
	}))
	t.Cleanup(be.Close)
	return be.Listener.Addr().String(), n
}

// adminDenied routes an exact /admin to a 403 (what an exact-path DENY
// answers) and everything else to cluster "be".
func adminDenied() []*routev3.Route {
	return []*routev3.Route{
		{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/admin"}},
			Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 403}}},
		prefixRoute("/", "be"),
	}
}

// rawH2Status sends one GET with the given :path over a raw HTTP/2
// connection (prior knowledge), with no client library between the test
// and the wire, and returns the :status the proxy answers.
func rawH2Status(t *testing.T, addr, path string) string {
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
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "h"}, {":path", path}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}) // into a bytes.Buffer, which does not fail
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	dec := hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no response headers for %q: %v", path, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck() // a failed write shows in what the test reads back
			}
		case *http2.RSTStreamFrame:
			return "RST_STREAM " + f.ErrCode.String()
		case *http2.GoAwayFrame:
			return "GOAWAY " + f.ErrCode.String()
		case *http2.HeadersFrame:
			fields, err := dec.DecodeFull(f.HeaderBlockFragment())
			if err != nil {
				t.Fatal(err)
			}
			for _, hf := range fields {
				if hf.Name == ":status" {
					return hf.Value
				}
			}
		}
	}
}

// TestFragmentRejected: a request target with a #fragment is answered 400
// before routing, as Envoy's HCM does (http_reject_path_with_fragment),
// on the HTTP/1.1 request-target and HTTP/2's :path, on every codec; it
// used to be forwarded ("/admin%23x" or "/admin#x") past an exact /admin
// match.
func TestFragmentRejected(t *testing.T) {
	forEachCodec(t, func(t *testing.T, codec Codec) {
		beAddr, seen := countingH1Backend(t)
		addr := startH2Proxy(t, codec, adminDenied(), nil, staticCluster("be", beAddr))
		answered := func(s string) bool { return strings.Contains(s, "\r\n\r\n") }
		if out := rawExchange(t, addr, "GET /admin HTTP/1.1\r\nHost: h\r\n\r\n", answered); !strings.HasPrefix(out, "HTTP/1.1 403 ") {
			t.Fatalf("/admin: %q, want the route's 403", out)
		}
		for _, target := range []string{"/admin#x", "/admin#", "/admin?a=1#x", "/ok#frag", "/admin%3F#x"} {
			out := rawExchange(t, addr, "GET "+target+" HTTP/1.1\r\nHost: h\r\n\r\n", answered)
			if !strings.HasPrefix(out, "HTTP/1.1 400 ") {
				t.Errorf("HTTP/1.1 %s: %q, want 400", target, out)
			}
			if st := rawH2Status(t, addr, target); st != "400" {
				t.Errorf("HTTP/2 :path %s: status %s, want 400", target, st)
			}
		}
		if n := seen.Load(); n != 0 {
			t.Errorf("the upstream got %d requests; want none", n)
		}
		if st := rawH2Status(t, addr, "/ok"); st != "200" {
			t.Errorf("HTTP/2 /ok: %s, want 200", st)
		}
	})
}

// TestHTTP10UpgradeRequired: without http_protocol_options.accept_http_10
// an HTTP/1.0 request is answered 426 Upgrade Required and the connection
// closes, as Envoy's codec does (checkProtocolVersion); with it the
// request is served (TestHCMHonouredValuesBehave).
func TestHTTP10UpgradeRequired(t *testing.T) {
	forEachCodec(t, func(t *testing.T, codec Codec) {
		beAddr, seen := countingH1Backend(t)
		for _, tc := range []struct {
			name   string
			accept bool
			raw    string
			want   []string
			not    []string
		}{
			{"refused", false, "GET /x HTTP/1.0\r\nHost: h\r\n\r\n",
				[]string{" 426 Upgrade Required\r\n", "\r\n\r\nUpgrade Required"}, []string{"\r\n\r\nok"}},
			{"refused, keep-alive and a second request", false, "GET /x HTTP/1.0\r\nHost: h\r\nConnection: keep-alive\r\n\r\nGET /y HTTP/1.1\r\nHost: h\r\n\r\n",
				[]string{" 426 "}, []string{"\r\n\r\nok", " 200 "}},
			{"accepted", true, "GET /x HTTP/1.0\r\nHost: h\r\n\r\n", []string{" 200 ", "\r\n\r\nok"}, []string{"426"}},
			{"HTTP/1.1 unaffected", false, "GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", []string{"HTTP/1.1 200 ", "\r\n\r\nok"}, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				addr := startH2Proxy(t, codec, adminDenied(), func(h *hcmv3.HttpConnectionManager) {
					if tc.accept {
						h.HttpProtocolOptions = &corev3.Http1ProtocolOptions{AcceptHttp_10: true}
					}
				}, staticCluster("be", beAddr))
				before := seen.Load()
				// The proxy closes the connection: rawExchange returns
				// at EOF (or 10 s, which fails the test).
				start := time.Now()
				out := rawExchange(t, addr, tc.raw, func(string) bool { return false })
				if time.Since(start) > 9*time.Second {
					t.Errorf("the connection stayed open")
				}
				for _, s := range tc.want {
					if !strings.Contains(out, s) {
						t.Errorf("answer %q lacks %q", out, s)
					}
				}
				for _, s := range tc.not {
					if strings.Contains(out, s) {
						t.Errorf("answer %q has %q", out, s)
					}
				}
				if got := seen.Load() - before; !tc.accept && strings.HasPrefix(tc.raw, "GET /x HTTP/1.0") && got != 0 {
					t.Errorf("the upstream got %d requests; want none", got)
				}
			})
		}
	})
}
