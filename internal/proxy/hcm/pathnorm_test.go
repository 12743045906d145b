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

// The four settings of Istio's meshConfig.pathNormalization.normalization,
// as istiod writes them on every HCM.
var (
	normNone  = pathNorm{escaped: hcmv3.HttpConnectionManager_KEEP_UNCHANGED}
	normBase  = pathNorm{normalize: true, escaped: hcmv3.HttpConnectionManager_KEEP_UNCHANGED}
	normMerge = pathNorm{normalize: true, merge: true, escaped: hcmv3.HttpConnectionManager_KEEP_UNCHANGED}
	normDec   = pathNorm{normalize: true, merge: true, escaped: hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD}
)

// TestPathNormApply: the examples of Istio's path normalization table
// (its pathnormalization integration test and the security best
// practices' table), per mode; "400" is a rejected path.
func TestPathNormApply(t *testing.T) {
	type tc struct{ in, none, base, merge, dec string }
	for _, c := range []tc{
		{"/", "/", "/", "/", "/"},
		{"/app/", "/app/", "/app/", "/app/", "/app/"},
		{"/app/../admin", "/app/../admin", "/admin", "/admin", "/admin"},
		{"/app", "/app", "/app", "/app", "/app"},
		{"/app//", "/app//", "/app//", "/app/", "/app/"},
		{"/app/%2f", "/app/%2f", "/app/%2f", "/app/%2f", "/app/"},
		{"/app%2f/", "/app%2f/", "/app%2f/", "/app%2f/", "/app/"},
		{"/xyz%30..//abc", "/xyz%30..//abc", "/xyz0..//abc", "/xyz0../abc", "/xyz0../abc"},
		{"/app/%2E./admin", "/app/%2E./admin", "/admin", "/admin", "/admin"},
		{`/app\admin`, `/app\admin`, "/app/admin", "/app/admin", "/app/admin"},
		{`/app/\/\/\admin`, `/app/\/\/\admin`, "/app//////admin", "/app/admin", "/app/admin"},
		{`/%2Fapp%5cadmin%5Cabc`, `/%2Fapp%5cadmin%5Cabc`, `/%2Fapp%5cadmin%5Cabc`, `/%2Fapp%5cadmin%5Cabc`, "/app/admin/abc"},
		{`/%5Capp%2f%5c%2F%2e%2e%2fadmin%5c\abc`, `/%5Capp%2f%5c%2F%2e%2e%2fadmin%5c\abc`, `/%5Capp%2f%5c%2F..%2fadmin%5c/abc`, `/%5Capp%2f%5c%2F..%2fadmin%5c/abc`, "/app/admin/abc"},
		{"/app//../admin", "/app//../admin", "/app/admin", "/app/admin", "/app/admin"},
		{"/app//../../admin", "/app//../../admin", "/admin", "/admin", "/admin"},
		{"/%c0%2e%c0%2e/admin", "/%c0%2e%c0%2e/admin", "/%c0.%c0./admin", "/%c0.%c0./admin", "/%c0.%c0./admin"},
		{"/%c0%2fadmin", "/%c0%2fadmin", "/%c0%2fadmin", "/%c0%2fadmin", "/%c0/admin"},
		// The attacks of the e2e test, and their normal forms.
		{"/public/../admin", "/public/../admin", "/admin", "/admin", "/admin"},
		{"/./admin", "/./admin", "/admin", "/admin", "/admin"},
		{"/admin/.", "/admin/.", "/admin/", "/admin/", "/admin/"},
		{"/admin/..", "/admin/..", "/", "/", "/"},
		{"/..", "/..", "/", "/", "/"},
		{"/../../admin", "/../../admin", "/admin", "/admin", "/admin"},
		{"//admin", "//admin", "//admin", "/admin", "/admin"},
		{"/%2Fadmin", "/%2Fadmin", "/%2Fadmin", "/%2Fadmin", "/admin"},
		{"/admin%2F..", "/admin%2F..", "/admin%2F..", "/admin%2F..", "/"},
		{"/%2e%2E/admin", "/%2e%2E/admin", "/admin", "/admin", "/admin"},
		// Not dot segments, nor escapes to decode: unchanged.
		{"/.../admin", "/.../admin", "/.../admin", "/.../admin", "/.../admin"},
		{"/..;/admin", "/..;/admin", "/..;/admin", "/..;/admin", "/..;/admin"},
		{"/.a/b.", "/.a/b.", "/.a/b.", "/.a/b.", "/.a/b."},
		{"/%252e%252e/admin", "/%252e%252e/admin", "/%252e%252e/admin", "/%252e%252e/admin", "/%252e%252e/admin"},
		{"/%zz/%4", "/%zz/%4", "/%zz/%4", "/%zz/%4", "/%zz/%4"},
		{"/%41%7e%2D", "/%41%7e%2D", "/A~-", "/A~-", "/A~-"},
		// Bytes outside the path's set are escaped; %00 and bad UTF-8
		// cannot be normalized.
		{"/a b{}", "/a b{}", "/a%20b%7B%7D", "/a%20b%7B%7D", "/a%20b%7B%7D"},
		{"/é", "/é", "/%C3%A9", "/%C3%A9", "/%C3%A9"},
		{"/admin%00", "/admin%00", "400", "400", "400"},
		{"/a\xff", "/a\xff", "400", "400", "400"},
		{"*", "*", "*", "*", "*"},
	} {
		for _, m := range []struct {
			name string
			p    pathNorm
			want string
		}{{"NONE", normNone, c.none}, {"BASE", normBase, c.base}, {"MERGE_SLASHES", normMerge, c.merge}, {"DECODE_AND_MERGE_SLASHES", normDec, c.dec}} {
			out, v := m.p.apply([]byte(c.in))
			got := string(out)
			switch v {
			case pathReject:
				got = "400"
			case pathRedirect:
				got = "307 " + got
			}
			if got != m.want {
				t.Errorf("%s %q: got %q, want %q", m.name, c.in, got, m.want)
			}
		}
	}
}

// TestPathNormEscapedSlashActions: REJECT_REQUEST refuses a path with
// %2F or %5C, UNESCAPE_AND_REDIRECT redirects to it unescaped, and
// without normalize_path the decoded slashes are the only change.
func TestPathNormEscapedSlashActions(t *testing.T) {
	rej := pathNorm{escaped: hcmv3.HttpConnectionManager_REJECT_REQUEST}
	red := pathNorm{escaped: hcmv3.HttpConnectionManager_UNESCAPE_AND_REDIRECT}
	fwd := pathNorm{escaped: hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD}
	for _, c := range []struct {
		p        pathNorm
		in, want string
		v        pathVerdict
	}{
		{rej, "/a%2fb", "/a%2fb", pathReject},
		{rej, "/a%5Cb", "/a%5Cb", pathReject},
		{rej, "/a%2eb/%25", "/a%2eb/%25", pathForward},
		{red, "/a%2Fb", "/a/b", pathRedirect},
		{red, "/a/b", "/a/b", pathForward},
		{fwd, "/a%2F..%5c/b", `/a/..\/b`, pathForward},
		{fwd, "/a%2", "/a%2", pathForward},
	} {
		out, v := c.p.apply([]byte(c.in))
		if string(out) != c.want || v != c.v {
			t.Errorf("%v %q: got %q verdict %d, want %q verdict %d", c.p.escaped, c.in, out, v, c.want, c.v)
		}
	}
}

// TestPathNormNormalPathAllocs: a path that is already normal costs no
// allocation, in every mode.
func TestPathNormNormalPathAllocs(t *testing.T) {
	path := []byte("/api/v1/items/42.json")
	for _, p := range []pathNorm{normBase, normMerge, normDec} {
		if n := testing.AllocsPerRun(100, func() {
			if out, _ := p.apply(path); &out[0] != &path[0] {
				t.Fatal("a normal path was copied")
			}
		}); n != 0 {
			t.Errorf("%+v: %v allocations, want 0", p, n)
		}
	}
}

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

// FuzzPathNorm: for any path, each of Istio's modes gives a path that
// starts with '/', has no dot segment left when it normalizes, no "//"
// when it merges, no escaped slash when it decodes, and that the same
// mode leaves unchanged (normalization is idempotent: a second proxy on
// the way changes nothing).
func FuzzPathNorm(f *testing.F) {
	for _, s := range []string{"/", "/a/../b", "/%2e%2E/x", `/a\..\b`, "//a//", "/a%2F..%5c/b", "/%c0%2e", "/a%", "/a%2", "/é/./", "/.//", "/a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !strings.HasPrefix(in, "/") {
			return
		}
		for _, p := range []pathNorm{normBase, normMerge, normDec} {
			out, v := p.apply([]byte(in))
			if v == pathReject {
				continue
			}
			s := string(out)
			if !strings.HasPrefix(s, "/") {
				t.Fatalf("%+v %q: %q does not start with /", p, in, s)
			}
			for _, seg := range strings.Split(s, "/") {
				if seg == "." || seg == ".." {
					t.Fatalf("%+v %q: %q keeps a dot segment", p, in, s)
				}
			}
			if p.merge && strings.Contains(s, "//") {
				t.Fatalf("%+v %q: %q keeps //", p, in, s)
			}
			if p.escaped == hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD && hasEscapedSlash(out) {
				t.Fatalf("%+v %q: %q keeps an escaped slash", p, in, s)
			}
			again, v2 := p.apply(out)
			if v2 != pathForward || string(again) != s {
				t.Fatalf("%+v %q: %q normalized again is %q (verdict %d)", p, in, s, again, v2)
			}
		}
	})
}
