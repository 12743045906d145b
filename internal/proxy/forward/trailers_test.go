package forward

import (
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestTrailersPolicy: only HTTP/2 to HTTP/2 trailers cross, without the
// forbidden, pseudo, conditional and x-envoy-* fields nor those the HCM
// owns; a request's allowed trailers reach the upstream request once its
// body ends.
func TestTrailersPolicy(t *testing.T) {
	p := &Trailers{Owns: func(n string) bool { return strings.EqualFold(n, "x-jwt-claim") }}
	in := http.Header{
		"Grpc-Status": {"0"}, "X-Checksum": {"ok"}, "X-Jwt-Claim": {"admin"},
		"Content-Length": {"1"}, "If-Match": {"x"}, "X-Envoy-Attempt-Count": {"2"},
	}
	for _, c := range []struct {
		from, to Wire
		want     []string
	}{
		{WireHTTP1, WireHTTP2, nil},
		{WireHTTP2, WireHTTP1, nil},
		{WireHTTP2, WireHTTP2, []string{"Grpc-Status", "X-Checksum"}},
	} {
		var got []string
		for k := range p.Forward(in, c.from, c.to) {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("h%d to h%d: %q, want %q", c.from, c.to, got, c.want)
		}
	}
	if len(in) != 6 {
		t.Errorf("the input was modified: %v", in)
	}

	r := &http.Request{ProtoMajor: 2, Trailer: http.Header{"X-Checksum": nil, "X-Jwt-Claim": nil}}
	out := &http.Request{Body: io.NopCloser(strings.NewReader("body"))}
	p.ForwardRequest(out, r, WireHTTP2)
	if _, ok := out.Trailer["X-Checksum"]; !ok || len(out.Trailer) != 1 {
		t.Fatalf("declared trailers %v, want X-Checksum alone", out.Trailer)
	}
	r.Trailer.Set("X-Checksum", "ok")
	r.Trailer.Set("X-Jwt-Claim", "admin")
	if _, err := io.ReadAll(out.Body); err != nil {
		t.Fatal(err)
	}
	if g := out.Trailer.Get("X-Checksum"); g != "ok" || len(out.Trailer) != 1 {
		t.Errorf("trailers after the body %v, want X-Checksum: ok alone", out.Trailer)
	}
	out = &http.Request{Body: io.NopCloser(strings.NewReader("body"))}
	p.ForwardRequest(out, r, WireHTTP1)
	if out.Trailer != nil {
		t.Errorf("to HTTP/1.1: trailers %v, want none", out.Trailer)
	}
}

// TestTrailersAllowedFold: field names compare in any ASCII case, and
// only in ASCII (a name that Unicode lowering would turn into a
// forbidden one is not that field on the wire); the name reaches Owns as
// it came.
func TestTrailersAllowedFold(t *testing.T) {
	var owned []string
	p := &Trailers{Owns: func(n string) bool { owned = append(owned, n); return n == "X-Jwt-Claim" }}
	long := "X-" + strings.Repeat("Long", 20)
	for _, c := range []struct {
		name string
		want bool
	}{
		{"CONTENT-LENGTH", false}, {"Content-Length", false}, {"content-length", false}, {"AUTHORIZATION", false},
		{"Proxy-Authentication-Info", false}, {"X-Request-Id", false}, {"TE", false},
		{"If-None-Match", false}, {"IF-", false}, {"If", true},
		{"X-ENVOY-Attempt-Count", false}, {"x-envoy-", false}, {"X-Envoy", true},
		{":Status", false}, {"", false},
		{"X-Jwt-Claim", false},
		{"Grpc-Status", true}, {"Grpc-Message", true}, {"X-Checksum", true},
		{"Content-Lengths", true}, {"\u212Aeep-Alive", true}, // the Kelvin sign: not "keep-alive" in ASCII
		{long, true}, {long[:64], true}, {"X-" + strings.Repeat("a", 63), true},
	} {
		if got := p.Allowed(c.name); got != c.want {
			t.Errorf("Allowed(%q) = %v, want %v", c.name, got, c.want)
		}
	}
	if !slices.Contains(owned, "X-Jwt-Claim") || !slices.Contains(owned, long) {
		t.Errorf("Owns saw %q, want the names as they came", owned)
	}
	// forbiddenTrailer looks up names that fit its buffer only.
	for n := range forbiddenTrailers {
		if len(n) >= forbiddenTrailerMax || n != strings.ToLower(n) {
			t.Errorf("forbidden trailer %q: want lower case, shorter than %d bytes", n, forbiddenTrailerMax)
		}
	}
}

// TestTrailersForwardNoCopy: when every field crosses, Forward returns
// the trailers themselves, with no allocation; when one is refused or has
// no value, a copy without it, the input unchanged.
func TestTrailersForwardNoCopy(t *testing.T) {
	p := &Trailers{Owns: func(string) bool { return false }}
	in := http.Header{"Grpc-Status": {"0"}, "Grpc-Message": {"ok"}, "X-Checksum": {"1"}}
	out := p.Forward(in, WireHTTP2, WireHTTP2)
	if len(out) != 3 || reflect.ValueOf(out).Pointer() != reflect.ValueOf(in).Pointer() {
		t.Errorf("Forward of allowed trailers = %v, want the input map itself", out)
	}
	if n := testing.AllocsPerRun(100, func() { out = p.Forward(in, WireHTTP2, WireHTTP2) }); n != 0 {
		t.Errorf("Forward of allowed trailers: %v allocations, want 0", n)
	}
	if got := p.Forward(http.Header{}, WireHTTP2, WireHTTP2); got != nil {
		t.Errorf("Forward of no trailers = %v, want nil", got)
	}
	if got := p.Forward(in, WireHTTP2, WireHTTP1); got != nil {
		t.Errorf("Forward to HTTP/1.1 = %v, want nil", got)
	}
	for _, extra := range []http.Header{{"Content-Type": {"x"}}, {"X-Empty": {}}, {"X-Empty": nil}} {
		mixed := in.Clone()
		maps.Copy(mixed, extra)
		got := p.Forward(mixed, WireHTTP2, WireHTTP2)
		if len(got) != 3 || got.Get("Grpc-Message") != "ok" || reflect.ValueOf(got).Pointer() == reflect.ValueOf(mixed).Pointer() {
			t.Errorf("Forward(%v) = %v, want a copy of the three allowed fields", mixed, got)
		}
		if len(mixed) != 4 {
			t.Errorf("Forward modified its input: %v", mixed)
		}
	}
	if got := p.Forward(http.Header{"Te": {"trailers"}, "X-None": nil}, WireHTTP2, WireHTTP2); got != nil {
		t.Errorf("Forward of refused trailers only = %v, want nil", got)
	}
}
