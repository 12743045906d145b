package hcm

import (
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func hcmConfig(mut func(h *hcmv3.HttpConnectionManager)) *hcmv3.HttpConnectionManager {
	router, _ := anypb.New(&routerv3.Router{})
	h := &hcmv3.HttpConnectionManager{
		StatPrefix:     "t",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "r"}},
		HttpFilters:    []*hcmv3.HttpFilter{{Name: routerFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	}
	if mut != nil {
		mut(h)
	}
	return h
}

func TestBuildLimits(t *testing.T) {
	f, err := Build(hcmConfig(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Limits != DefaultLimits() {
		t.Errorf("defaults %+v, want Envoy's %+v", f.Limits, DefaultLimits())
	}
	if f.Limits.StreamIdleTimeout != 5*time.Minute || f.Limits.IdleTimeout != time.Hour || f.Limits.MaxHeadersCount != 100 || f.Limits.MaxRequestHeadBytes != 60<<10 {
		t.Errorf("defaults %+v are not Envoy's", f.Limits)
	}
	f, err = Build(hcmConfig(func(h *hcmv3.HttpConnectionManager) {
		h.StreamIdleTimeout = durationpb.New(0) // Istio: disabled
		h.RequestTimeout = durationpb.New(3 * time.Second)
		h.RequestHeadersTimeout = durationpb.New(2 * time.Second)
		h.MaxRequestHeadersKb = wrapperspb.UInt32(96)
		h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{
			IdleTimeout:              durationpb.New(time.Minute),
			MaxConnectionDuration:    durationpb.New(time.Hour),
			MaxHeadersCount:          wrapperspb.UInt32(50),
			MaxRequestsPerConnection: wrapperspb.UInt32(7),
		}
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Limits{IdleTimeout: time.Minute, MaxConnectionDuration: time.Hour, MaxRequestsPerConnection: 7,
		RequestHeadersTimeout: 2 * time.Second, RequestTimeout: 3 * time.Second, StreamIdleTimeout: 0,
		MaxHeadersCount: 50, MaxRequestHeadBytes: 96 << 10, DelayedCloseTimeout: time.Second}
	if f.Limits != want {
		t.Errorf("limits %+v, want %+v", f.Limits, want)
	}
}

// TestBuildRefusesWhatItCannotHonour: a field the HTTP/1.1 path doesn't
// implement is an error naming it, never accepted and ignored.
func TestBuildRefusesWhatItCannotHonour(t *testing.T) {
	for field, mut := range map[string]func(h *hcmv3.HttpConnectionManager){
		"max_stream_duration": func(h *hcmv3.HttpConnectionManager) {
			h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{MaxStreamDuration: durationpb.New(time.Second)}
		},
		"headers_with_underscores_action": func(h *hcmv3.HttpConnectionManager) {
			h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{HeadersWithUnderscoresAction: corev3.HttpProtocolOptions_REJECT_REQUEST}
		},
		"max_request_headers_kb": func(h *hcmv3.HttpConnectionManager) { h.MaxRequestHeadersKb = wrapperspb.UInt32(0) },
		"proxy_100_continue":     func(h *hcmv3.HttpConnectionManager) { h.Proxy_100Continue = true },
		"stream_idle_timeout":    func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = &durationpb.Duration{Seconds: -1} },
	} {
		_, err := Build(hcmConfig(mut), nil)
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: got %v, want an error naming it", field, err)
		}
	}
}

// TestBuildRefusesUnknownFilters: Istio's telemetry and ALPN filters, which
// Strait does not run, are refused by name like any other filter it does
// not know, unless marked optional.
func TestBuildRefusesUnknownFilters(t *testing.T) {
	for _, name := range []string{"envoy.filters.http.grpc_stats", "istio.alpn", "envoy.filters.http.lua"} {
		for _, optional := range []bool{false, true} {
			h := hcmConfig(func(h *hcmv3.HttpConnectionManager) {
				h.HttpFilters = append([]*hcmv3.HttpFilter{{Name: name, IsOptional: optional}}, h.HttpFilters...)
			})
			_, err := Build(h, nil)
			switch {
			case optional && err != nil:
				t.Errorf("%s (optional): %v; want it skipped", name, err)
			case !optional && (err == nil || !strings.Contains(err.Error(), name)):
				t.Errorf("%s: err = %v; want one naming the filter", name, err)
			}
		}
	}
}
