package hcm

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/fwdheaders"
)

// schemeSeeingBackend is a raw HTTP/2 (h2c) backend that answers every
// stream with 200 and a header x-seen-scheme holding the :scheme of its
// request head, which net/http's server does not show.
func schemeSeeingBackend(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	serve := func(c net.Conn) {
		defer c.Close()
		pre := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(c, pre); err != nil || string(pre) != http2.ClientPreface {
			return
		}
		fr := http2.NewFramer(c, c)
		if fr.WriteSettings() != nil {
			return
		}
		dec := hpack.NewDecoder(4096, nil)
		var buf bytes.Buffer
		enc := hpack.NewEncoder(&buf)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() && fr.WriteSettingsAck() != nil {
					return
				}
			case *http2.PingFrame:
				if !f.IsAck() && fr.WritePing(true, f.Data) != nil {
					return
				}
			case *http2.HeadersFrame:
				fields, err := dec.DecodeFull(f.HeaderBlockFragment())
				if err != nil {
					return
				}
				scheme := "-"
				for _, hf := range fields {
					if hf.Name == ":scheme" {
						scheme = hf.Value
					}
				}
				buf.Reset()
				_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})        // into a bytes.Buffer, which does not fail
				_ = enc.WriteField(hpack.HeaderField{Name: "x-seen-scheme", Value: scheme}) // into a bytes.Buffer, which does not fail
				if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, BlockFragment: buf.Bytes(), EndHeaders: true, EndStream: true}) != nil {
					return
				}
			}
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return ln.Addr().String()
}

// TestUpstreamHTTP2Scheme: an HTTP/2 upstream request carries the
// request's :scheme, as Envoy's router keeps it: https for a request that
// came over TLS, http in clear text; an HTTP/2 client's own :scheme even
// when it is not its transport's; for an HTTP/1.1 request, the
// x-forwarded-proto it leaves with decides (a client's own, kept unless
// the HCM is the edge).
func TestUpstreamHTTP2Scheme(t *testing.T) {
	srvTLS, cliTLS := mutualTLS(t, "spiffe://cluster.local/ns/default/sa/client")
	srvTLS.ClientAuth = tls.NoClientCert
	srvTLS.NextProtos = []string{"h2", "http/1.1"}
	be := schemeSeeingBackend(t)
	for _, codec := range codecs {
		for _, edge := range []bool{false, true} {
			mod := func(h *hcmv3.HttpConnectionManager) {
				if edge {
					h.UseRemoteAddress = wrapperspb.Bool(true)
				}
			}
			tlsAddr := startTLSProxy(t, codec, srvTLS, mod, h2Cluster(t, "be", be))
			plainAddr := startH2Proxy(t, codec, []*routev3.Route{prefixRoute("/", "be")}, mod, h2Cluster(t, "be", be))
			for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
				for _, secure := range []bool{false, true} {
					for _, xfp := range []string{"", "https", "http"} {
						name := fmt.Sprintf("%s/edge=%v/%s/tls=%v/xfp=%q", codec, edge, proto, secure, xfp)
						t.Run(name, func(t *testing.T) {
							base, cfg := "http://"+plainAddr, (*tls.Config)(nil)
							if secure {
								base, cfg = "https://"+tlsAddr, cliTLS
							}
							want := fwdheaders.SchemeOf(secure)
							if proto == "HTTP/1.1" && !edge && xfp != "" {
								want = xfp
							}
							req, _ := http.NewRequest("GET", base+"/x", nil)
							if xfp != "" {
								req.Header.Set("X-Forwarded-Proto", xfp)
							}
							resp, err := schemeClient(t, proto, cfg, tlsAddr).Do(req)
							if err != nil {
								t.Fatal(err)
							}
							_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
							resp.Body.Close()
							if got := resp.Header.Get("X-Seen-Scheme"); resp.StatusCode != 200 || got != want {
								t.Errorf("%d, upstream :scheme %q, want 200 and %q", resp.StatusCode, got, want)
							}
						})
					}
				}
			}
			// An HTTP/2 client's own :scheme is kept, also when it is not
			// its transport's: https on h2c, http on TLS.
			t.Run(fmt.Sprintf("%s/edge=%v/HTTP/2 :scheme https on h2c", codec, edge), func(t *testing.T) {
				checkH2Scheme(t, rawSchemeClient(t, nil), "https://"+plainAddr, "https")
			})
			t.Run(fmt.Sprintf("%s/edge=%v/HTTP/2 :scheme http on TLS", codec, edge), func(t *testing.T) {
				checkH2Scheme(t, rawSchemeClient(t, cliTLS), "http://"+tlsAddr, "http")
			})
		}
	}
}

// rawSchemeClient is an HTTP/2 client whose :scheme is its URL's,
// whatever its transport: TLS with cfg, else h2c.
func rawSchemeClient(t *testing.T, cfg *tls.Config) *http.Client {
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil || cfg == nil {
			return c, err
		}
		tc := cfg.Clone()
		tc.NextProtos = []string{"h2"}
		if tc.ServerName == "" {
			tc.ServerName, _, _ = net.SplitHostPort(addr)
		}
		return tls.Client(c, tc), nil
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func checkH2Scheme(t *testing.T, c *http.Client, url, want string) {
	t.Helper()
	resp, err := c.Get(url + "/x")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
	resp.Body.Close()
	if got := resp.Header.Get("X-Seen-Scheme"); resp.StatusCode != 200 || got != want {
		t.Errorf("%d, upstream :scheme %q, want 200 and %q", resp.StatusCode, got, want)
	}
}
