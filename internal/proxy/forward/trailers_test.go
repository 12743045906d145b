package forward

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestTrailersPolicy: only HTTP/2 to HTTP/2 trailers cross, without the
// forbidden, pseudo, conditional and x-envoy-* fields nor those the HCM
// owns; a request's allowed trailers reach the upstream request once its
// body ends.
func TestTrailersPolicy(t *testing.T) {
	p := &Trailers{Owns: func(n string) bool { return n == "x-jwt-claim" }}
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
