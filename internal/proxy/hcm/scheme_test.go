package hcm

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// schemeRoutes: /s answers which :scheme the route saw, /old redirects to
// another host without naming a scheme, the rest goes to cluster be.
func schemeRoutes() []*routev3.Route {
	prefix := func(p string) *routev3.RouteMatch {
		return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: p}}
	}
	direct := func(body string) *routev3.Route_DirectResponse {
		return &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 200,
			Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: body}}}}
	}
	https := prefix("/s")
	https.Headers = []*routev3.HeaderMatcher{{Name: ":scheme", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
		StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "https"}}}}}
	return []*routev3.Route{
		{Match: https, Action: direct("scheme=https")},
		{Match: prefix("/s"), Action: direct("scheme=other")},
		{Match: prefix("/old"), Action: &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{HostRedirect: "new.example",
			PathRewriteSpecifier: &routev3.RedirectAction_PrefixRewrite{PrefixRewrite: "/new"}, ResponseCode: routev3.RedirectAction_FOUND}}},
		prefixRoute("/", "be"),
	}
}

// TestSchemeFollowsTLS: on a connection that terminates TLS, both codecs
// and both downstream protocols route on :scheme https, send
// x-forwarded-proto https upstream (HTTP/1.1 and HTTP/2 upstreams) unless
// the client set one, overwrite the client's when use_remote_address says
// the HCM is the edge, and redirect to https; the same requests in clear
// text see http.
func TestSchemeFollowsTLS(t *testing.T) {
	srvTLS, cliTLS := mutualTLS(t, "spiffe://cluster.local/ns/default/sa/client")
	srvTLS.ClientAuth = tls.NoClientCert
	srvTLS.NextProtos = []string{"h2", "http/1.1"}
	be := echoBackend(t)
	beH2 := protoBackendXFP(t)
	for _, codec := range codecs {
		for _, up := range []string{"h1", "h2"} {
			for _, edge := range []bool{false, true} {
				mod := func(h *hcmv3.HttpConnectionManager) {
					h.GetRouteConfig().VirtualHosts[0].Routes = schemeRoutes()
					if edge {
						h.UseRemoteAddress = wrapperspb.Bool(true)
					}
				}
				cl := staticCluster("be", be.Listener.Addr().String())
				if up == "h2" {
					cl = h2Cluster(t, "be", beH2.Listener.Addr().String())
				}
				tlsAddr := startTLSProxy(t, codec, srvTLS, mod, cl)
				plainAddr := startH2Proxy(t, codec, nil, func(h *hcmv3.HttpConnectionManager) {
					h.RouteSpecifier = &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
						Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}}}}}
					mod(h)
				}, cl)
				for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
					name := fmt.Sprintf("%s/%s-upstream/edge=%v/%s", codec, up, edge, proto)
					t.Run(name, func(t *testing.T) {
						checkScheme(t, schemeClient(t, proto, cliTLS, tlsAddr), "https://"+tlsAddr, "https", edge)
						checkScheme(t, schemeClient(t, proto, nil, plainAddr), "http://"+plainAddr, "http", edge)
					})
				}
			}
		}
	}
}

// checkScheme sends the requests of TestSchemeFollowsTLS to base with c
// and wants scheme from the connection.
func checkScheme(t *testing.T, c *http.Client, base, scheme string, edge bool) {
	t.Helper()
	get := func(path, xfp string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		if xfp != "" {
			req.Header.Set("X-Forwarded-Proto", xfp)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s%s: %v", base, path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
		resp.Body.Close()
		return resp
	}
	if got := get("/", "").Header.Get("X-Seen-Proto"); got != scheme {
		t.Errorf("%s: upstream x-forwarded-proto %q, want %q", base, got, scheme)
	}
	// A client's own value is kept, unless the HCM is the edge.
	other := map[string]string{"http": "https", "https": "http"}[scheme]
	want := other
	if edge {
		want = scheme
	}
	if got := get("/", other).Header.Get("X-Seen-Proto"); got != want {
		t.Errorf("%s: client sent x-forwarded-proto %q (edge %v): upstream saw %q, want %q", base, other, edge, got, want)
	}
	resp, err := c.Get(base + "/s")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantBody := "scheme=other"
	if scheme == "https" {
		wantBody = "scheme=https"
	}
	if string(body) != wantBody {
		t.Errorf("%s/s: %q, want %q (route on :scheme)", base, body, wantBody)
	}
	if got, want := get("/old/x", "").Header.Get("Location"), scheme+"://new.example/new/x"; got != want {
		t.Errorf("%s/old/x: Location %q, want %q", base, got, want)
	}
}

// schemeClient is an HTTP/1.1 or HTTP/2 client for addr, over TLS when
// cfg is set (h2c with prior knowledge in clear text); it does not follow
// redirects.
func schemeClient(t *testing.T, proto string, cfg *tls.Config, addr string) *http.Client {
	noFollow := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	var rt http.RoundTripper
	switch {
	case proto == "HTTP/2" && cfg != nil:
		c := cfg.Clone()
		c.NextProtos = []string{"h2"}
		rt = &http2.Transport{TLSClientConfig: c}
	case proto == "HTTP/2":
		rt = &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, a string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, a)
		}}
	case cfg != nil:
		c := cfg.Clone()
		c.NextProtos = []string{"http/1.1"}
		rt = &http.Transport{TLSClientConfig: c}
	default:
		rt = &http.Transport{}
	}
	t.Cleanup(func() {
		if ci, ok := rt.(interface{ CloseIdleConnections() }); ok {
			ci.CloseIdleConnections()
		}
	})
	return &http.Client{Transport: rt, Timeout: 10 * time.Second, CheckRedirect: noFollow}
}

// protoBackendXFP is an HTTP/2 (h2c) backend that echoes x-forwarded-proto
// as X-Seen-Proto.
func protoBackendXFP(t *testing.T) *httptest.Server {
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			w.WriteHeader(http.StatusHTTPVersionNotSupported)
			return
		}
		w.Header().Set("X-Seen-Proto", strings.Join(r.Header.Values("X-Forwarded-Proto"), ","))
	}))
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// TestBuildScheme: x-forwarded-proto is overwritten only at the edge
// (use_remote_address with no trusted hops), and scheme_header_transformation
// is refused by name.
func TestBuildScheme(t *testing.T) {
	for _, tc := range []struct {
		name          string
		mod           func(*hcmv3.HttpConnectionManager)
		overwrite     bool
		err           string
		kept, secured string // forwardedProto of a client's "http" on TLS, and of none on TLS
	}{
		{name: "default", mod: func(*hcmv3.HttpConnectionManager) {}, kept: "http", secured: "https"},
		{name: "edge", mod: func(h *hcmv3.HttpConnectionManager) { h.UseRemoteAddress = wrapperspb.Bool(true) },
			overwrite: true, kept: "https", secured: "https"},
		{name: "edge behind a trusted hop", mod: func(h *hcmv3.HttpConnectionManager) {
			h.UseRemoteAddress = wrapperspb.Bool(true)
			h.XffNumTrustedHops = 1
		}, kept: "http", secured: "https"},
		{name: "scheme_header_transformation", mod: func(h *hcmv3.HttpConnectionManager) {
			h.SchemeHeaderTransformation = &corev3.SchemeHeaderTransformation{
				Transformation: &corev3.SchemeHeaderTransformation_SchemeToOverwrite{SchemeToOverwrite: "https"}}
		}, err: "scheme_header_transformation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &hcmv3.HttpConnectionManager{StatPrefix: "test",
				RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "r"}},
				HttpFilters:    []*hcmv3.HttpFilter{{Name: routerFilter}}}
			tc.mod(h)
			f, err := Build(h, nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Build: %v, want an error naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.xfp.Overwrites() != tc.overwrite {
				t.Errorf("overwrite %v, want %v", f.xfp.Overwrites(), tc.overwrite)
			}
			if got := f.xfp.Value([]byte("http"), true, true); got != tc.kept {
				t.Errorf("client's http on TLS: %q, want %q", got, tc.kept)
			}
			if got := f.xfp.Value(nil, false, true); got != tc.secured {
				t.Errorf("none on TLS: %q, want %q", got, tc.secured)
			}
			if got := f.xfp.Value(nil, false, false); got != "http" {
				t.Errorf("none in clear text: %q, want http", got)
			}
		})
	}
}

// TestShadowForwardedProtoOverTLS: a shadow of a request that came over
// TLS carries x-forwarded-proto https, as the main request does, on both
// codecs and both downstream protocols.
func TestShadowForwardedProtoOverTLS(t *testing.T) {
	srvTLS, cliTLS := mutualTLS(t, "spiffe://cluster.local/ns/default/sa/client")
	srvTLS.ClientAuth = tls.NoClientCert
	srvTLS.NextProtos = []string{"h2", "http/1.1"}
	be := echoBackend(t)
	seen := make(chan string, 16)
	shadow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("X-Forwarded-Proto")
	}))
	t.Cleanup(shadow.Close)
	forEachCodec(t, func(t *testing.T, codec Codec) {
		addr := startTLSProxy(t, codec, srvTLS, func(h *hcmv3.HttpConnectionManager) {
			rt := prefixRoute("/", "be")
			rt.GetRoute().RequestMirrorPolicies = []*routev3.RouteAction_RequestMirrorPolicy{{Cluster: "shadow"}}
			h.GetRouteConfig().VirtualHosts[0].Routes = []*routev3.Route{rt}
		}, staticCluster("be", be.Listener.Addr().String()), staticCluster("shadow", shadow.Listener.Addr().String()))
		for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
			resp, err := schemeClient(t, proto, cliTLS, addr).Get("https://" + addr + "/m")
			if err != nil {
				t.Fatalf("%s: %v", proto, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
			resp.Body.Close()
			if got := resp.Header.Get("X-Seen-Proto"); got != "https" {
				t.Errorf("%s: upstream x-forwarded-proto %q, want https", proto, got)
			}
			select {
			case got := <-seen:
				if got != "https" {
					t.Errorf("%s: shadow x-forwarded-proto %q, want https", proto, got)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: the shadow got no request", proto)
			}
		}
	})
}
