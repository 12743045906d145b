package hcm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	jose "github.com/go-jose/go-jose/v4"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/straitmesh/strait/internal/proxy/filters/http/jwtauthn"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/route"
)

// jwtKey signs test tokens; its JWKS is what the filter trusts.
type jwtKey struct {
	key  *ecdsa.PrivateKey
	jwks string
}

func newJWTKey(t testing.TB) jwtKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: "k", Algorithm: "ES256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	return jwtKey{key: k, jwks: string(b)}
}

func (k jwtKey) sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k.key}, (&jose.SignerOptions{}).WithHeader("kid", "k"))
	if err != nil {
		t.Fatal(err)
	}
	pl, _ := json.Marshal(claims)
	o, err := s.Sign(pl)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := o.CompactSerialize()
	return out
}

// istioJWTFilter is the jwt_authn filter istiod emits for one jwtRule with
// outputPayloadToHeader and a fromParams location.
func istioJWTFilter(t testing.TB, jwks string) *hcmv3.HttpFilter {
	cfg := &jwtv3.JwtAuthentication{
		Providers: map[string]*jwtv3.JwtProvider{"origins-0": {
			Issuer: "https://issuer.test", ForwardPayloadHeader: "x-jwt-payload", PayloadInMetadata: "payload",
			FromHeaders: []*jwtv3.JwtHeader{{Name: "Authorization", ValuePrefix: "Bearer "}},
			FromParams:  []string{"token"},
			JwksSourceSpecifier: &jwtv3.JwtProvider_LocalJwks{LocalJwks: &corev3.DataSource{
				Specifier: &corev3.DataSource_InlineString{InlineString: jwks}}},
		}},
		Rules: []*jwtv3.RequirementRule{{
			Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			RequirementType: &jwtv3.RequirementRule_Requires{Requires: &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_RequiresAny{
				RequiresAny: &jwtv3.JwtRequirementOrList{Requirements: []*jwtv3.JwtRequirement{
					{RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: "origins-0"}},
					{RequiresType: &jwtv3.JwtRequirement_AllowMissing{AllowMissing: &emptypb.Empty{}}},
				}}}}},
		}},
		BypassCorsPreflight: true,
	}
	return &hcmv3.HttpFilter{Name: jwtauthn.Name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAnyT(t, cfg)}}
}

// headerEcho answers the request headers it got as JSON.
func headerEcho(t testing.TB) *httptest.Server {
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(r.Header) // a handler's write fails only when the client has gone
	}))
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetHTTP1(true)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// TestJWTFilter runs jwt_authn on every request path (the HTTP/1.1
// codec, net/http, HTTP/2) to an HTTP/1.1 and an HTTP/2 upstream.
func TestJWTFilter(t *testing.T) {
	k := newJWTKey(t)
	be := headerEcho(t)
	beAddr := strings.TrimPrefix(be.URL, "http://")
	now := time.Now()
	valid := k.sign(t, map[string]any{"iss": "https://issuer.test", "sub": "alice", "exp": now.Add(time.Hour).Unix()})
	expired := k.sign(t, map[string]any{"iss": "https://issuer.test", "sub": "alice", "exp": now.Add(-time.Hour).Unix()})
	wrongIss := k.sign(t, map[string]any{"iss": "https://other.test", "sub": "alice", "exp": now.Add(time.Hour).Unix()})
	type result struct {
		code    int
		body    string
		headers http.Header // what the upstream saw (nil: a local reply)
		resp    http.Header
	}
	cases := []struct {
		name   string
		path   string
		header map[string]string
		check  func(t *testing.T, r result)
	}{
		{"valid token", "/", map[string]string{"Authorization": "Bearer " + valid}, func(t *testing.T, r result) {
			if r.code != 200 || r.headers == nil {
				t.Fatalf("got %d %q, want the upstream's 200", r.code, r.body)
			}
			if a := r.headers.Get("Authorization"); a != "" {
				t.Errorf("upstream saw Authorization %q; forward is false", a)
			}
			pl, err := base64.RawURLEncoding.DecodeString(r.headers.Get("X-Jwt-Payload"))
			if err != nil || !strings.Contains(string(pl), `"sub":"alice"`) {
				t.Errorf("x-jwt-payload %q (%s): %v", r.headers.Get("X-Jwt-Payload"), pl, err)
			}
		}},
		{"token in query", "/q?token=" + valid, nil, func(t *testing.T, r result) {
			if r.code != 200 || r.headers.Get("X-Jwt-Payload") == "" {
				t.Errorf("got %d, payload %q", r.code, r.headers.Get("X-Jwt-Payload"))
			}
		}},
		{"missing token", "/", nil, func(t *testing.T, r result) {
			if r.code != 200 || r.headers.Get("X-Jwt-Payload") != "" {
				t.Errorf("got %d, payload %q; want 200 without a payload", r.code, r.headers.Get("X-Jwt-Payload"))
			}
		}},
		{"client's payload header without a token is removed", "/", map[string]string{"X-Jwt-Payload": "forged"}, func(t *testing.T, r result) {
			if r.code != 200 || r.headers == nil {
				t.Fatalf("got %d %q, want the upstream's 200", r.code, r.body)
			}
			if v := r.headers.Values("X-Jwt-Payload"); len(v) != 0 {
				t.Errorf("upstream saw x-jwt-payload %q; want none", v)
			}
		}},
		{"client's own payload header is replaced", "/", map[string]string{"Authorization": "Bearer " + valid, "X-Jwt-Payload": "forged"}, func(t *testing.T, r result) {
			if v := r.headers.Values("X-Jwt-Payload"); len(v) != 1 || v[0] == "forged" {
				t.Errorf("upstream saw x-jwt-payload %q", v)
			}
		}},
		{"expired", "/", map[string]string{"Authorization": "Bearer " + expired}, func(t *testing.T, r result) {
			if r.code != 401 || r.body != "Jwt is expired" || r.headers != nil {
				t.Errorf("got %d %q (upstream headers %v), want 401 \"Jwt is expired\"", r.code, r.body, r.headers)
			}
			if w := r.resp.Get("Www-Authenticate"); !strings.HasPrefix(w, `Bearer realm="http://svc.example:80/"`) || !strings.Contains(w, `error="invalid_token"`) {
				t.Errorf("www-authenticate %q", w)
			}
		}},
		{"wrong issuer", "/", map[string]string{"Authorization": "Bearer " + wrongIss}, func(t *testing.T, r result) {
			if r.code != 401 || r.body != "Jwt issuer is not configured" {
				t.Errorf("got %d %q", r.code, r.body)
			}
		}},
		{"bad token in query", "/q?token=abc.def.ghi", nil, func(t *testing.T, r result) {
			if r.code != 401 {
				t.Errorf("got %d %q, want 401", r.code, r.body)
			}
		}},
		{"no route still checks the token", "/none", map[string]string{"Authorization": "Bearer " + expired}, func(t *testing.T, r result) {
			if r.code != 401 {
				t.Errorf("got %d, want 401 before the 404", r.code)
			}
		}},
	}
	routes := []*routev3.Route{prefixRoute("/h2", "be2"), prefixRoute("/none", "absent"), prefixRoute("/", "be")}
	routes[1].Action = &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 404}}
	for _, codec := range codecs {
		addr, st := startH2ProxyStats(t, codec, routes, func(h *hcmv3.HttpConnectionManager) {
			h.HttpFilters = append([]*hcmv3.HttpFilter{istioJWTFilter(t, k.jwks)}, h.HttpFilters...)
		}, staticCluster("be", beAddr), h2Cluster(t, "be2", beAddr))
		denied := 0
		for _, cl := range []struct {
			name string
			c    *http.Client
		}{{"http1", &http.Client{Timeout: 10 * time.Second}}, {"h2c", h2cClient()}} {
			for _, up := range []string{"", "/h2"} {
				for _, tc := range cases {
					path := tc.path
					if up != "" && path != "/none" {
						path = up + path
					}
					t.Run(string(codec)+"/"+cl.name+up+"/"+tc.name, func(t *testing.T) {
						req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
						req.Host = "svc.example:80"
						for k, v := range tc.header {
							req.Header.Set(k, v)
						}
						resp, err := cl.c.Do(req)
						if err != nil {
							t.Fatal(err)
						}
						b, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						r := result{code: resp.StatusCode, body: string(b), resp: resp.Header}
						if resp.StatusCode == 200 {
							if err := json.Unmarshal(b, &r.headers); err != nil {
								t.Fatalf("upstream answer %q: %v", b, err)
							}
						}
						if r.code == 401 {
							denied++
						}
						if up != "" {
							r.resp.Set("Www-Authenticate", strings.Replace(r.resp.Get("Www-Authenticate"), "/h2/", "/", 1))
						}
						tc.check(t, r)
					})
				}
			}
		}
		if got := st.Counter("http.test.jwt_authn.denied").Load(); got != uint64(denied) || denied == 0 {
			t.Errorf("%s: jwt_authn.denied = %d; want %d", codec, got, denied)
		}
		if st.Counter("http.test.jwt_authn.allowed").Load() == 0 {
			t.Errorf("%s: jwt_authn.allowed not counted", codec)
		}
	}
}

// TestJWTFilterMetadata checks what a verified token leaves in the
// request's metadata on the stream paths: nothing without a token.
func TestJWTFilterMetadata(t *testing.T) {
	k := newJWTKey(t)
	f, err := Build(&hcmv3.HttpConnectionManager{
		StatPrefix:     "m",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "r"}},
		HttpFilters: []*hcmv3.HttpFilter{istioJWTFilter(t, k.jwks),
			{Name: routerFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAnyT(t, &routerv3.Router{})}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok := k.sign(t, map[string]any{"iss": "https://issuer.test", "sub": "bob", "aud": "svc", "azp": "web", "exp": time.Now().Add(time.Hour).Unix()})
	r := httptest.NewRequest("GET", "http://svc/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	st, _ := testStreamDecode(f, r)
	md := &st.meta
	if st.replied {
		t.Fatal("a valid token was answered")
	}
	for key, want := range map[string]any{jwtauthn.KeyPrincipal: "https://issuer.test/bob", jwtauthn.KeyPresenter: "web"} {
		if v, _ := md.Get(jwtauthn.AuthnNamespace, key); v != want {
			t.Errorf("%s = %v; want %v", key, v, want)
		}
	}
	if v, _ := md.Get(jwtauthn.AuthnNamespace, jwtauthn.KeyAudiences); len(v.([]string)) != 1 || v.([]string)[0] != "svc" {
		t.Errorf("audiences %v", v)
	}
	if v, ok := md.Get(jwtauthn.Name, "payload"); !ok || v.(map[string]any)["sub"] != "bob" {
		t.Errorf("payload %v", v)
	}
	r = httptest.NewRequest("GET", "http://svc/", nil)
	if st, _ := testStreamDecode(f, r); st.replied {
		t.Errorf("no token: answered")
	} else if _, ok := st.meta.Get(jwtauthn.AuthnNamespace, jwtauthn.KeyPrincipal); ok {
		t.Errorf("no token: metadata written")
	}
}

// TestJWTFilterGRPC: a gRPC call with a bad token is answered in gRPC's
// trailers-only form, UNAUTHENTICATED with the filter's message, as
// Envoy's local reply maps a 401.
func TestJWTFilterGRPC(t *testing.T) {
	k := newJWTKey(t)
	be := headerEcho(t)
	addr := startH2Proxy(t, CodecStrait, []*routev3.Route{prefixRoute("/", "be")}, func(h *hcmv3.HttpConnectionManager) {
		h.HttpFilters = append([]*hcmv3.HttpFilter{istioJWTFilter(t, k.jwks)}, h.HttpFilters...)
	}, staticCluster("be", strings.TrimPrefix(be.URL, "http://")))
	expired := k.sign(t, map[string]any{"iss": "https://issuer.test", "sub": "a", "exp": time.Now().Add(-time.Hour).Unix()})
	req, _ := http.NewRequest("POST", "http://"+addr+"/svc.Method", strings.NewReader("\x00\x00\x00\x00\x00"))
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	req.Header.Set("Authorization", "Bearer "+expired)
	resp, err := h2cClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
	resp.Body.Close()
	st, msg := resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message")
	if st == "" {
		st, msg = resp.Trailer.Get("Grpc-Status"), resp.Trailer.Get("Grpc-Message")
	}
	if resp.StatusCode != 200 || st != "16" || msg != "Jwt is expired" {
		t.Errorf("got HTTP %d grpc-status %q message %q, want 200, 16 (UNAUTHENTICATED), \"Jwt is expired\"", resp.StatusCode, st, msg)
	}
}

// TestJWTFilterMetadataHTTP1: on the HTTP/1.1 codec the verified token
// lands in the connection's per-request metadata, and the header edits in
// the fields written upstream; the next request starts empty.
func TestJWTFilterMetadataHTTP1(t *testing.T) {
	k := newJWTKey(t)
	f, err := Build(&hcmv3.HttpConnectionManager{
		StatPrefix:     "m",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "r"}},
		HttpFilters: []*hcmv3.HttpFilter{istioJWTFilter(t, k.jwks),
			{Name: routerFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAnyT(t, &routerv3.Router{})}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok := k.sign(t, map[string]any{"iss": "https://issuer.test", "sub": "carol", "exp": time.Now().Add(time.Hour).Unix()})
	c := &h1conn{filter: f}
	head := "GET /p HTTP/1.1\r\nHost: svc\r\nAuthorization: Bearer " + tok + "\r\n\r\n"
	if err := http1.ParseRequest([]byte(head), &c.req); err != nil {
		t.Fatal(err)
	}
	st := &c.stream
	st.begin(c)
	st.rreq = route.Request{Host: "svc", Path: "/p", Method: "GET", Headers: &c.req.Headers}
	if st.decode(st) {
		t.Fatal("valid token answered locally")
	}
	if v, _ := c.meta.Get(jwtauthn.AuthnNamespace, jwtauthn.KeyPrincipal); v != "https://issuer.test/carol" {
		t.Errorf("principal %v", v)
	}
	var payload, auth bool
	for _, h := range c.req.Headers {
		payload = payload || string(h.Name) == "x-jwt-payload"
		auth = auth || http1.EqualFold(h.Name, "Authorization")
	}
	if !payload || auth {
		t.Errorf("payload header added %v, authorization still forwarded %v", payload, auth)
	}
	c.meta.Reset()
	if _, ok := c.meta.Get(jwtauthn.AuthnNamespace, jwtauthn.KeyPrincipal); ok {
		t.Error("metadata survives Reset")
	}
}
