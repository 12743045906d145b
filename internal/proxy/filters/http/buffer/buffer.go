// Package buffer is the envoy.filters.http.buffer HTTP filter: the whole
// request is read before it is sent upstream, and a request whose body
// is larger than max_request_bytes is answered 413, as Envoy's buffer
// filter does (source/extensions/filters/http/buffer/buffer_filter.cc):
// its decodeHeaders sets the stream's decoder buffer limit to
// max_request_bytes and stops, its decodeData buffers until the body's
// end, and the filter manager answers 413 "Payload Too Large" when the
// buffer passes the limit. The HCM does the buffering for it
// (httpfilter.BodyDecoder, hcm/body.go), and sends the buffered request
// with its content-length, which Envoy's filter adds when the request had
// none (maybeAddContentLength).
//
// A route (or its virtual host) may turn the filter off or give it
// another max_request_bytes with a BufferPerRoute in
// typed_per_filter_config; the most specific one applies, as Envoy's
// initConfig reads it (mostSpecificPerFilterConfig).
package buffer

import (
	"fmt"

	bufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/buffer/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// Name is the HTTP filter name.
const Name = "envoy.filters.http.buffer"

// The types of the filter's typed_config and of its per-route config.
const (
	TypeURL         = "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer"
	PerRouteTypeURL = "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.BufferPerRoute"
)

// Settings are a compiled Buffer: how much of a request the filter
// buffers. Immutable.
type Settings struct {
	// MaxRequestBytes is the largest body that goes upstream; a larger
	// one is answered 413.
	MaxRequestBytes int64
}

// Parse decodes a typed_config Any holding a Buffer.
func Parse(a *anypb.Any) (*Settings, error) {
	if a == nil {
		return nil, fmt.Errorf("%s: typed_config is required (a Buffer with max_request_bytes)", Name)
	}
	var m bufferv3.Buffer
	if a.GetTypeUrl() != TypeURL {
		return nil, fmt.Errorf("%s: typed config %s is not %s", Name, a.GetTypeUrl(), TypeURL)
	}
	if err := a.UnmarshalTo(&m); err != nil {
		return nil, fmt.Errorf("%s: typed config is not a valid Buffer: %w", Name, err)
	}
	return Build(&m, "")
}

// Build compiles a Buffer; field names its place in the config ("" the
// filter's own typed_config, "buffer" a BufferPerRoute's).
func Build(m *bufferv3.Buffer, field string) (*Settings, error) {
	prefix := Name
	if field != "" {
		prefix += ": " + field
	}
	if err := fieldaudit.Check(prefix, m.ProtoReflect(), bufferHonoured, nil); err != nil { // fields.go
		return nil, err
	}
	at := "max_request_bytes"
	if field != "" {
		at = field + "." + at
	}
	v := m.GetMaxRequestBytes()
	switch {
	case v == nil:
		return nil, fmt.Errorf("%s: %s is required", Name, at)
	case v.GetValue() == 0:
		// Envoy's watermark buffer takes a limit of 0 as none: the
		// filter would buffer any body whole.
		return nil, fmt.Errorf("%s: %s must be at least 1 (0 would buffer without bound)", Name, at)
	}
	return &Settings{MaxRequestBytes: int64(v.GetValue())}, nil
}

// ParsePerRoute decodes a typed_per_filter_config Any holding a
// BufferPerRoute: disabled turns the filter off on the route
// (httpfilter.DisabledConfig, which the chain reads), buffer replaces the
// filter's settings.
func ParsePerRoute(a *anypb.Any) (any, error) {
	if a.GetTypeUrl() != PerRouteTypeURL {
		return nil, fmt.Errorf("%s: per-route config %s is not %s", Name, a.GetTypeUrl(), PerRouteTypeURL)
	}
	var m bufferv3.BufferPerRoute
	if err := a.UnmarshalTo(&m); err != nil {
		return nil, fmt.Errorf("%s: per-route config is not a valid BufferPerRoute: %w", Name, err)
	}
	if err := fieldaudit.Check(Name+": BufferPerRoute", m.ProtoReflect(), bufferPerRouteHonoured, nil); err != nil {
		return nil, err
	}
	switch o := m.GetOverride().(type) {
	case *bufferv3.BufferPerRoute_Disabled:
		if !o.Disabled {
			return nil, fmt.Errorf("%s: BufferPerRoute.disabled must be true when set (give buffer to override the settings)", Name)
		}
		return httpfilter.DisabledConfig{}, nil
	case *bufferv3.BufferPerRoute_Buffer:
		return Build(o.Buffer, "BufferPerRoute.buffer")
	}
	return nil, fmt.Errorf("%s: BufferPerRoute needs disabled or buffer", Name)
}
