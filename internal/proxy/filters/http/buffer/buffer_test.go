package buffer

import (
	"strings"
	"testing"

	bufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/buffer/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/httpfilter/streamtest"
)

func anyOf(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func buf(n uint32) *bufferv3.Buffer { return &bufferv3.Buffer{MaxRequestBytes: wrapperspb.UInt32(n)} }

// TestBuild: the filter reads max_request_bytes, and refuses a config
// without it, with 0, of another type, or with a field it does not know,
// naming the filter and the field.
func TestBuild(t *testing.T) {
	f, err := Factory{}.Build(anyOf(t, buf(4096)), httpfilter.BuildContext{})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.(*Filter).def.MaxRequestBytes; got != 4096 || f.Name() != Name {
		t.Errorf("max %d name %q, want 4096 %q", got, f.Name(), Name)
	}
	unknown := anyOf(t, buf(1))
	unknown.Value = append(unknown.Value, 0xf8, 0x01, 0x01) // field 31: not in this API
	notBuffer := anyOf(t, buf(1))
	notBuffer.Value = []byte{0x0a, 0x02, 0x08} // max_request_bytes, cut short
	for _, tc := range []struct {
		name string
		a    *anypb.Any
		want string
	}{
		{"none", nil, "typed_config is required"},
		{"no max_request_bytes", anyOf(t, &bufferv3.Buffer{}), Name + ": max_request_bytes is required"},
		{"zero", anyOf(t, buf(0)), Name + ": max_request_bytes must be at least 1"},
		{"another type", anyOf(t, &faultv3.HTTPFault{}), "HTTPFault is not " + TypeURL},
		{"not a Buffer", notBuffer, "is not a valid Buffer"},
		{"unknown field", unknown, Name + " has fields strait-proxy does not know"},
	} {
		if _, err := (Factory{}).Build(tc.a, httpfilter.BuildContext{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if got := (Factory{}).Names(); len(got) != 2 || got[0] != Name || got[1] != TypeURL {
		t.Errorf("Names %v", got)
	}
}

// TestParsePerRoute: disabled is the chain's DisabledConfig, buffer a
// limit of its own; anything else is refused by name.
func TestParsePerRoute(t *testing.T) {
	v, err := Factory{}.ParsePerRoute(anyOf(t, &bufferv3.BufferPerRoute{Override: &bufferv3.BufferPerRoute_Disabled{Disabled: true}}))
	if _, ok := v.(httpfilter.DisabledConfig); err != nil || !ok {
		t.Errorf("disabled: %v %v, want DisabledConfig", v, err)
	}
	v, err = Factory{}.ParsePerRoute(anyOf(t, &bufferv3.BufferPerRoute{Override: &bufferv3.BufferPerRoute_Buffer{Buffer: buf(7)}}))
	if s, ok := v.(*Settings); err != nil || !ok || s.MaxRequestBytes != 7 {
		t.Errorf("buffer: %v %v, want a limit of 7", v, err)
	}
	unknown := anyOf(t, &bufferv3.BufferPerRoute{Override: &bufferv3.BufferPerRoute_Buffer{Buffer: buf(7)}})
	unknown.Value = append(unknown.Value, 0xf8, 0x01, 0x01)
	bad := anyOf(t, &bufferv3.BufferPerRoute{})
	bad.Value = []byte{0x12, 0x05}
	for _, tc := range []struct {
		name string
		a    *anypb.Any
		want string
	}{
		{"a Buffer", anyOf(t, buf(7)), "per-route config " + TypeURL + " is not " + PerRouteTypeURL},
		{"not a BufferPerRoute", bad, "is not a valid BufferPerRoute"},
		{"disabled false", anyOf(t, &bufferv3.BufferPerRoute{Override: &bufferv3.BufferPerRoute_Disabled{}}), "BufferPerRoute.disabled must be true"},
		{"buffer 0", anyOf(t, &bufferv3.BufferPerRoute{Override: &bufferv3.BufferPerRoute_Buffer{Buffer: buf(0)}}), "BufferPerRoute.buffer.max_request_bytes must be at least 1"},
		{"empty", anyOf(t, &bufferv3.BufferPerRoute{}), "needs disabled or buffer"},
		{"unknown field", unknown, "BufferPerRoute has fields strait-proxy does not know"},
	} {
		if _, err := (Factory{}).ParsePerRoute(tc.a); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), Name) {
			t.Errorf("%s: %v, want an error naming %s with %q", tc.name, err, Name, tc.want)
		}
	}
	outer, inner := &Settings{MaxRequestBytes: 1}, &Settings{MaxRequestBytes: 2}
	if got := (Factory{}).MergePerRoute(outer, inner); got != inner {
		t.Errorf("merge: %v, want the route's", got)
	}
	if got := (Factory{}).MergePerRoute(outer, nil); got != outer {
		t.Errorf("merge without the route's: %v, want the virtual host's", got)
	}
}

// perRoute is a route whose buffer config is cfg.
type perRoute struct {
	streamtest.Route
	cfg any
}

func (r *perRoute) PerFilterConfig(name string) any {
	if name == Name {
		return r.cfg
	}
	return nil
}

type routedStream struct {
	*streamtest.Stream
	rt httpfilter.Route
}

func (s *routedStream) Route() httpfilter.Route { return s.rt }

// TestDecodesBody: the filter asks for every body, up to the route's
// limit when it has one, else the filter's; it lets the head and every
// chunk through (the HCM buffers and answers 413).
func TestDecodesBody(t *testing.T) {
	f := &Filter{def: &Settings{MaxRequestBytes: 10}}
	plain := streamtest.New("h", "/", nil)
	if limit, on := f.DecodesBody(plain); limit != 10 || !on {
		t.Errorf("no route: %d %v, want 10 true", limit, on)
	}
	routed := &routedStream{Stream: plain, rt: &perRoute{cfg: &Settings{MaxRequestBytes: 99}}}
	if limit, on := f.DecodesBody(routed); limit != 99 || !on {
		t.Errorf("route's: %d %v, want 99 true", limit, on)
	}
	other := &routedStream{Stream: plain, rt: &perRoute{}}
	if limit, on := f.DecodesBody(other); limit != 10 || !on {
		t.Errorf("route without config: %d %v, want 10 true", limit, on)
	}
	if f.DecodeHeaders(plain) != httpfilter.Continue || f.DecodeData(plain, []byte("x"), false) != httpfilter.Continue || f.DecodeData(plain, nil, true) != httpfilter.Continue {
		t.Error("the filter stopped a request")
	}
	if plain.ReplyStatus != 0 {
		t.Errorf("the filter answered %d", plain.ReplyStatus)
	}
}
