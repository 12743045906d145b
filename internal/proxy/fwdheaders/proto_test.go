package fwdheaders

import (
	"net/http"
	"testing"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestRequestScheme: an absolute-form target's scheme first, then the
// x-forwarded-proto the request leaves with when it is http or https,
// then the connection's.
func TestRequestScheme(t *testing.T) {
	for _, tc := range []struct {
		abs, xfp string
		secure   bool
		want     string
	}{
		{"", "", false, "http"},
		{"", "", true, "https"},
		{"HTTPS", "http", false, "https"},
		{"", "https", false, "https"},
		{"", "HTTP", true, "http"},
		{"", "ftp", true, "https"},
	} {
		if got := RequestScheme(tc.abs, tc.xfp, tc.secure); got != tc.want {
			t.Errorf("RequestScheme(%q, %q, %v) = %q, want %q", tc.abs, tc.xfp, tc.secure, got, tc.want)
		}
	}
}

// TestProtoApplyHTTP: the edge (use_remote_address, no trusted hops)
// replaces a client's x-forwarded-proto with the connection's scheme;
// otherwise the client's is kept and a missing one is set.
func TestProtoApplyHTTP(t *testing.T) {
	edge := ProtoOf(&hcmv3.HttpConnectionManager{UseRemoteAddress: wrapperspb.Bool(true)})
	inner := ProtoOf(&hcmv3.HttpConnectionManager{})
	for _, tc := range []struct {
		p      Proto
		client string // "" none
		secure bool
		want   string
	}{
		{edge, "http", true, "https"},
		{edge, "", false, "http"},
		{inner, "http", true, "http"},
		{inner, "", true, "https"},
	} {
		r := &http.Request{Header: http.Header{}}
		if tc.client != "" {
			r.Header.Set("X-Forwarded-Proto", tc.client)
		}
		var val [1]string
		r2 := &http.Request{Header: r.Header.Clone()}
		tc.p.ApplyHTTP(r, tc.secure, nil)
		tc.p.ApplyHTTP(r2, tc.secure, &val)
		if got := r.Header.Get("X-Forwarded-Proto"); got != tc.want {
			t.Errorf("%+v client %q secure %v: %q, want %q", tc.p, tc.client, tc.secure, got, tc.want)
		}
		if got := r2.Header.Get("X-Forwarded-Proto"); got != tc.want {
			t.Errorf("%+v client %q secure %v, with storage: %q, want %q", tc.p, tc.client, tc.secure, got, tc.want)
		}
		// The value set goes in val, with no allocation; the client's
		// kept leaves val alone.
		if set := tc.client == "" || tc.p.overwrite; set != (val[0] == tc.want) || (set && &r2.Header["X-Forwarded-Proto"][0] != &val[0]) {
			t.Errorf("%+v client %q: storage %q, header %q", tc.p, tc.client, val[0], r2.Header["X-Forwarded-Proto"])
		}
	}
}
