package hcm

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestPathNormBehaves: through the proxy, on each codec and over HTTP/2,
// the normalized path is what routing sees (a route for /admin answers
// 403) and what the upstream receives; a path that cannot be normalized
// is answered 400, and UNESCAPE_AND_REDIRECT answers 307 with the new
// path. With the fields unset the path is forwarded as received.
func TestPathNormBehaves(t *testing.T) {
	forEachCodec(t, testPathNormBehaves)
}

func testPathNormBehaves(t *testing.T, codec Codec) {
	seen := make(chan string, 16)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.RequestURI
		_, _ = io.WriteString(w, "ok") // a handler's write fails only when the client has gone
	}))
	t.Cleanup(be.Close)
	admin := &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/admin"}},
		Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 403}}}
	routes := []*routev3.Route{admin, prefixRoute("/", "be")}
	start := func(mut func(h *hcmv3.HttpConnectionManager)) string {
		return startH2Proxy(t, codec, routes, mut, staticCluster("be", be.Listener.Addr().String()))
	}
	decode := start(func(h *hcmv3.HttpConnectionManager) {
		h.NormalizePath = wrapperspb.Bool(true)
		h.MergeSlashes = true
		h.PathWithEscapedSlashesAction = hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD
	})
	redirect := start(func(h *hcmv3.HttpConnectionManager) {
		h.PathWithEscapedSlashesAction = hcmv3.HttpConnectionManager_UNESCAPE_AND_REDIRECT
	})
	none := start(nil)

	complete := func(s string) bool { return strings.Contains(s, "\r\n\r\n") }
	upstream := func(t *testing.T) string {
		t.Helper()
		select {
		case u := <-seen:
			return u
		case <-time.After(10 * time.Second):
			t.Fatal("the upstream saw no request")
			return ""
		}
	}
	for _, c := range []struct {
		addr, target, status, upstream string
	}{
		{decode, "/public/../admin", " 403 ", ""},
		{decode, "/./admin", " 403 ", ""},
		{decode, "//admin", " 403 ", ""},
		{decode, "/%2Fadmin", " 403 ", ""},
		{decode, "/public/./x//y%2f..?q=/../a", " 200 ", "/public/x/?q=/../a"},
		{decode, "http://h/a/../b?z", " 200 ", "/b?z"}, // absolute-form
		{decode, "/admin%00", " 400 ", ""},
		{redirect, "/a%2Fb?q", " 307 ", ""},
		{none, "/public/../admin", " 200 ", "/public/../admin"},
	} {
		out := rawExchange(t, c.addr, "GET "+c.target+" HTTP/1.1\r\nHost: h\r\n\r\n", complete)
		if !strings.Contains(out, c.status) {
			t.Errorf("%s: answer %q, want%s", c.target, out, c.status)
			continue
		}
		if c.status == " 307 " && !strings.Contains(strings.ToLower(out), "\r\nlocation: /a/b?q\r\n") {
			t.Errorf("%s: answer %q, want location /a/b?q", c.target, out)
		}
		if c.upstream != "" {
			if got := upstream(t); got != c.upstream {
				t.Errorf("%s: upstream saw %q, want %q", c.target, got, c.upstream)
			}
		}
	}

	// HTTP/2 (h2c).
	get := func(addr, path string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Opaque = path // sent as written
		cl := h2cClient()
		cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := get(decode, "/public/..%2Fadmin"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("HTTP/2 /public/..%%2Fadmin: %d, want 403 (routed as /admin)", resp.StatusCode)
	}
	if resp := get(decode, "/x/./y//z"); resp.StatusCode != http.StatusOK {
		t.Errorf("HTTP/2 /x/./y//z: %d, want 200", resp.StatusCode)
	} else if got := upstream(t); got != "/x/y/z" {
		t.Errorf("HTTP/2: upstream saw %q, want /x/y/z", got)
	}
	if resp := get(decode, "/admin%00"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("HTTP/2 /admin%%00: %d, want 400", resp.StatusCode)
	}
	if resp := get(redirect, "/a%5cb"); resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != `/a\b` {
		t.Errorf("HTTP/2 redirect: %d location %q, want 307 to /a\\b", resp.StatusCode, resp.Header.Get("Location"))
	}
}
