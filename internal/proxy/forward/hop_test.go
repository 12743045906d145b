package forward

import (
	"io"
	"net/http"
	"reflect"
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	upstreamhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
)

// TestRemoveHop: the fixed hop-by-hop fields (RFC 9110 §7.6.1, and
// HTTP2-Settings) and every field a Connection header names, in any case
// and over several Connection lines, are removed; end-to-end fields stay.
func TestRemoveHop(t *testing.T) {
	h := http.Header{
		"Connection":          {"close, X-Foo ,\tx-bar\t", "keep-alive,,x-baz"},
		"Keep-Alive":          {"timeout=5"},
		"Proxy-Connection":    {"keep-alive"},
		"Proxy-Authenticate":  {"Basic"},
		"Proxy-Authorization": {"Basic Zm9vOmJhcg=="},
		"Te":                  {"gzip"},
		"Trailer":             {"X-Checksum"},
		"Transfer-Encoding":   {"chunked"},
		"Upgrade":             {"h2c"},
		"Http2-Settings":      {"AAMAAABkAAQAAP__"},
		"X-Foo":               {"1"},
		"X-Bar":               {"2"},
		"X-Baz":               {"3"},
		"X-Foobar":            {"kept"},
		"Content-Type":        {"text/plain"},
		"Authorization":       {"Bearer t"},
		"Content-Length":      {"4"},
	}
	RemoveHop(h)
	want := http.Header{"X-Foobar": {"kept"}, "Content-Type": {"text/plain"}, "Authorization": {"Bearer t"}, "Content-Length": {"4"}}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("after RemoveHop: %v, want %v", h, want)
	}

	// Without a Connection header only the fixed list goes.
	h = http.Header{"Upgrade": {"websocket"}, "X-Foo": {"1"}}
	RemoveHop(h)
	if !reflect.DeepEqual(h, http.Header{"X-Foo": {"1"}}) {
		t.Errorf("no Connection: %v, want X-Foo alone", h)
	}
}

// TestSplitComma: a Connection value's list elements (RFC 9110 §5.6.1):
// optional whitespace (SP, HTAB) around each trimmed, empty elements
// skipped, inner whitespace kept.
func TestSplitComma(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{" \t ", nil},
		{",,", nil},
		{"a", []string{"a"}},
		{"close", []string{"close"}},
		{"a,b", []string{"a", "b"}},
		{" a , b ", []string{"a", "b"}},
		{"\ta\t,\tbb\t", []string{"a", "bb"}},
		{"a,,b", []string{"a", "b"}},
		{",a,", []string{"a"}},
		{"a, ,b", []string{"a", "b"}},
		{"x y, z", []string{"x y", "z"}},
		{"ab ", []string{"ab"}},
		{" ab", []string{"ab"}},
	} {
		if got := splitComma(c.in); !slices.Equal(got, c.want) {
			t.Errorf("splitComma(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestParseGRPCTimeoutZero: "0S" is a valid grpc-timeout (a deadline
// already passed), not a malformed one.
func TestParseGRPCTimeoutZero(t *testing.T) {
	for _, v := range []string{"0S", "0n", "00000000H"} {
		if d, ok := ParseGRPCTimeout(v); !ok || d != 0 {
			t.Errorf("ParseGRPCTimeout(%q) = %v %v, want 0 true", v, d, ok)
		}
	}
}

// TestWireOf: HTTP/2 is WireHTTP2, any other major version WireHTTP1;
// the zero Wire is neither.
func TestWireOf(t *testing.T) {
	if WireHTTP1 != 1 || WireHTTP2 != 2 {
		t.Errorf("WireHTTP1, WireHTTP2 = %d, %d, want 1, 2", WireHTTP1, WireHTTP2)
	}
	for major, want := range map[int]Wire{0: WireHTTP1, 1: WireHTTP1, 2: WireHTTP2, 3: WireHTTP1} {
		if got := WireOf(major); got != want {
			t.Errorf("WireOf(%d) = %d, want %d", major, got, want)
		}
	}
}

// TestTrailersAllowedEdges: an empty name and pseudo-headers never cross;
// a plain field does, unless the HCM owns it.
func TestTrailersAllowedEdges(t *testing.T) {
	p := &Trailers{}
	for name, want := range map[string]bool{
		"": false, ":status": false, ":path": false, "grpc-status": true, "x": true, "X-Custom": true,
		"if-none-match": false, "X-Envoy-Upstream-Service-Time": false, "content-type": false,
	} {
		if got := p.Allowed(name); got != want {
			t.Errorf("Allowed(%q) = %v, want %v", name, got, want)
		}
	}
	p.Owns = func(n string) bool { return n == "X-Custom" }
	if p.Allowed("X-Custom") || !p.Allowed("X-Other") {
		t.Error("Owns: an owned header crossed, or another did not")
	}
}

// hopStepReader returns its data a byte at a time, then io.EOF.
type hopStepReader struct{ data string }

func (r *hopStepReader) Read(p []byte) (int, error) {
	if r.data == "" {
		return 0, io.EOF
	}
	p[0] = r.data[0]
	r.data = r.data[1:]
	return 1, nil
}

// TestTrailerBodyCopiesAtEOF: a streamed request's trailer values are
// copied when its body ends, not before: values the downstream sends
// while the body is still flowing arrive with the last read.
func TestTrailerBodyCopiesAtEOF(t *testing.T) {
	p := &Trailers{}
	r := &http.Request{ProtoMajor: 2, Trailer: http.Header{"X-Checksum": nil}}
	out := &http.Request{Body: io.NopCloser(&hopStepReader{data: "ab"})}
	p.ForwardRequest(out, r, WireHTTP2)
	buf := make([]byte, 8)
	if n, err := out.Body.Read(buf); n != 1 || err != nil {
		t.Fatalf("first read: %d %v", n, err)
	}
	r.Trailer.Set("X-Checksum", "early") // what the server has so far
	if n, err := out.Body.Read(buf); n != 1 || err != nil {
		t.Fatalf("second read: %d %v", n, err)
	}
	if v := out.Trailer["X-Checksum"]; v != nil {
		t.Errorf("trailer copied before the body ended: %q", v)
	}
	r.Trailer.Set("X-Checksum", "final")
	if n, err := out.Body.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("last read: %d %v, want 0 EOF", n, err)
	}
	if v := out.Trailer.Get("X-Checksum"); v != "final" {
		t.Errorf("trailer at EOF = %q, want final", v)
	}
}

// TestUpstreamWire: a cluster that uses the downstream protocol sends a
// request in the version it came in; an HTTP/1.1 cluster always in
// HTTP/1.1.
func TestUpstreamWire(t *testing.T) {
	a, err := anypb.New(&upstreamhttp.HttpProtocolOptions{
		UpstreamProtocolOptions: &upstreamhttp.HttpProtocolOptions_UseDownstreamProtocolConfig{
			UseDownstreamProtocolConfig: &upstreamhttp.HttpProtocolOptions_UseDownstreamHttpConfig{
				Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}}}})
	if err != nil {
		t.Fatal(err)
	}
	down := hopStaticCluster("down", "127.0.0.1:1")
	down.TypedExtensionProtocolOptions = map[string]*anypb.Any{cluster.HTTPProtocolOptionsKey: a}
	cm, _ := hopManager(t, down, hopStaticCluster("h1", "127.0.0.1:1"))
	for _, c := range []struct {
		cluster string
		major   int
		want    Wire
	}{
		{"down", 2, WireHTTP2}, {"down", 1, WireHTTP1}, {"h1", 2, WireHTTP1}, {"h1", 1, WireHTTP1},
	} {
		if got := UpstreamWire(cm.Get(c.cluster), &http.Request{ProtoMajor: c.major}); got != c.want {
			t.Errorf("UpstreamWire(%s, HTTP/%d) = %d, want %d", c.cluster, c.major, got, c.want)
		}
	}
}
