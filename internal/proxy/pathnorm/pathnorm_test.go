package pathnorm

import (
	"strings"
	"testing"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// The four settings of Istio's meshConfig.pathNormalization.normalization,
// as istiod writes them on every HCM.
var (
	normNone  = Policy{escaped: hcmv3.HttpConnectionManager_KEEP_UNCHANGED}
	normBase  = Policy{normalize: true, escaped: hcmv3.HttpConnectionManager_KEEP_UNCHANGED}
	normMerge = Policy{normalize: true, merge: true, escaped: hcmv3.HttpConnectionManager_KEEP_UNCHANGED}
	normDec   = Policy{normalize: true, merge: true, escaped: hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD}
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
			p    Policy
			want string
		}{{"NONE", normNone, c.none}, {"BASE", normBase, c.base}, {"MERGE_SLASHES", normMerge, c.merge}, {"DECODE_AND_MERGE_SLASHES", normDec, c.dec}} {
			out, v := m.p.Apply([]byte(c.in))
			got := string(out)
			switch v {
			case Reject:
				got = "400"
			case Redirect:
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
	rej := Policy{escaped: hcmv3.HttpConnectionManager_REJECT_REQUEST}
	red := Policy{escaped: hcmv3.HttpConnectionManager_UNESCAPE_AND_REDIRECT}
	fwd := Policy{escaped: hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD}
	for _, c := range []struct {
		p        Policy
		in, want string
		v        Verdict
	}{
		{rej, "/a%2fb", "/a%2fb", Reject},
		{rej, "/a%5Cb", "/a%5Cb", Reject},
		{rej, "/a%2eb/%25", "/a%2eb/%25", Forward},
		{red, "/a%2Fb", "/a/b", Redirect},
		{red, "/a/b", "/a/b", Forward},
		{fwd, "/a%2F..%5c/b", `/a/..\/b`, Forward},
		{fwd, "/a%2", "/a%2", Forward},
	} {
		out, v := c.p.Apply([]byte(c.in))
		if string(out) != c.want || v != c.v {
			t.Errorf("%v %q: got %q verdict %d, want %q verdict %d", c.p.escaped, c.in, out, v, c.want, c.v)
		}
	}
}

// TestPathNormNormalPathAllocs: a path that is already normal costs no
// allocation, in every mode.
func TestPathNormNormalPathAllocs(t *testing.T) {
	path := []byte("/api/v1/items/42.json")
	for _, p := range []Policy{normBase, normMerge, normDec} {
		if n := testing.AllocsPerRun(100, func() {
			if out, _ := p.Apply(path); &out[0] != &path[0] {
				t.Fatal("a normal path was copied")
			}
		}); n != 0 {
			t.Errorf("%+v: %v allocations, want 0", p, n)
		}
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
		for _, p := range []Policy{normBase, normMerge, normDec} {
			out, v := p.Apply([]byte(in))
			if v == Reject {
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
			again, v2 := p.Apply(out)
			if v2 != Forward || string(again) != s {
				t.Fatalf("%+v %q: %q normalized again is %q (verdict %d)", p, in, s, again, v2)
			}
		}
	})
}
