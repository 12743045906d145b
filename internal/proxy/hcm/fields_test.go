package hcm

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/fieldtest"
)

// TestHCMFieldsClassified: every HttpConnectionManager field is honoured or
// refused, not both, and the tables name only real fields, so that a new
// Envoy API's field is noticed here rather than accepted by accident.
func TestHCMFieldsClassified(t *testing.T) {
	fieldtest.Classified(t, (&hcmv3.HttpConnectionManager{}).ProtoReflect().Descriptor(), hcmHonoured, hcmRefused)
	fieldtest.Known(t, (&corev3.Http1ProtocolOptions{}).ProtoReflect().Descriptor(), http1Fields)
	fieldtest.Known(t, (&corev3.HttpProtocolOptions{}).ProtoReflect().Descriptor(), commonOptionsFields)
	fieldtest.Known(t, (&hcmv3.HttpConnectionManager_UpgradeConfig{}).ProtoReflect().Descriptor(), upgradeConfigFields)
	fieldtest.Known(t, (&hcmv3.Rds{}).ProtoReflect().Descriptor(), rdsFields)
	fieldtest.Known(t, (&corev3.ConfigSource{}).ProtoReflect().Descriptor(), rdsConfigSourceFields)
}

// TestHCMRefusedFields: each refused field, set, is an error naming it.
func TestHCMRefusedFields(t *testing.T) {
	fields := (&hcmv3.HttpConnectionManager{}).ProtoReflect().Descriptor().Fields()
	for n := range hcmRefused {
		t.Run(string(n), func(t *testing.T) {
			h := hcmConfig(nil)
			fieldtest.SetSomething(h.ProtoReflect(), fields.ByName(n))
			_, err := Build(h, nil)
			if err == nil || !strings.Contains(err.Error(), string(n)) {
				t.Fatalf("got %v, want an error naming %s", err, n)
			}
		})
	}
}

// TestHCMHonouredFieldsAccepted: each honoured field, set to a value
// strait implements, builds (the tables are not refusing what they list).
func TestHCMHonouredFieldsAccepted(t *testing.T) {
	ads := &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
	h := hcmConfig(func(h *hcmv3.HttpConnectionManager) {
		h.CodecType = hcmv3.HttpConnectionManager_HTTP2
		h.HttpProtocolOptions = &corev3.Http1ProtocolOptions{AcceptHttp_10: true, AllowAbsoluteUrl: wrapperspb.Bool(true)}
		h.Http2ProtocolOptions = &corev3.Http2ProtocolOptions{MaxConcurrentStreams: wrapperspb.UInt32(10)}
		h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(time.Minute)}
		h.MaxRequestHeadersKb = wrapperspb.UInt32(60)
		h.StreamIdleTimeout = durationpb.New(0)
		h.RequestTimeout = durationpb.New(time.Minute)
		h.RequestHeadersTimeout = durationpb.New(time.Minute)
		h.DelayedCloseTimeout = durationpb.New(time.Second)
		h.UseRemoteAddress = wrapperspb.Bool(false)
		h.XffNumTrustedHops = 1
		h.SkipXffAppend = true
		h.PreserveExternalRequestId = true
		h.GenerateRequestId = wrapperspb.Bool(true)
		h.ForwardClientCertDetails = hcmv3.HttpConnectionManager_APPEND_FORWARD
		h.SetCurrentClientCertDetails = &hcmv3.HttpConnectionManager_SetCurrentClientCertDetails{Uri: true}
		h.UpgradeConfigs = []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket", Enabled: wrapperspb.Bool(true)}}
		h.NormalizePath = wrapperspb.Bool(true)
		h.MergeSlashes = true
		h.PathWithEscapedSlashesAction = hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD
		h.ServerHeaderTransformation = hcmv3.HttpConnectionManager_PASS_THROUGH
		h.AddUserAgent = wrapperspb.Bool(false)
		h.AddProxyProtocolConnectionState = wrapperspb.Bool(true)
		withZipkin(t, 1)(h) // tracing and request_id_extension (tracing_test.go)
		h.RouteSpecifier = &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: "80", ConfigSource: &corev3.ConfigSource{
			ConfigSourceSpecifier: ads.ConfigSourceSpecifier, InitialFetchTimeout: durationpb.New(0), ResourceApiVersion: corev3.ApiVersion_V3}}}
	})
	if _, err := Build(h, nil); err != nil {
		t.Fatal(err)
	}
	// Every honoured field but those a test can't set without more config
	// (http_filters beyond the router, route_config with rds, access_log
	// with a log file) is set above.
	skip := map[protoreflect.Name]bool{"http_filters": true, "route_config": true, "access_log": true, "stat_prefix": true}
	for n := range hcmHonoured {
		if !skip[n] && !h.ProtoReflect().Has(h.ProtoReflect().Descriptor().Fields().ByName(n)) {
			t.Errorf("%s is honoured but the test does not set it", n)
		}
	}
}

// TestHCMRefusedValues: an honoured field set to a value strait does not
// implement is an error naming it.
func TestHCMRefusedValues(t *testing.T) {
	adsWith := func(mut func(cs *corev3.ConfigSource)) func(h *hcmv3.HttpConnectionManager) {
		return func(h *hcmv3.HttpConnectionManager) {
			cs := &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
			mut(cs)
			h.RouteSpecifier = &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: "r", ConfigSource: cs}}
		}
	}
	for _, tc := range []struct {
		name string
		mut  func(h *hcmv3.HttpConnectionManager)
	}{
		{"generate_request_id", func(h *hcmv3.HttpConnectionManager) { h.GenerateRequestId = wrapperspb.Bool(false) }},
		{"path_with_escaped_slashes_action", func(h *hcmv3.HttpConnectionManager) {
			h.PathWithEscapedSlashesAction = 99 // a newer API's action
		}},
		{"server_header_transformation", func(h *hcmv3.HttpConnectionManager) {
			h.ServerHeaderTransformation = hcmv3.HttpConnectionManager_APPEND_IF_ABSENT
		}},
		{"add_user_agent", func(h *hcmv3.HttpConnectionManager) { h.AddUserAgent = wrapperspb.Bool(true) }},
		{"add_proxy_protocol_connection_state", func(h *hcmv3.HttpConnectionManager) {
			h.AddProxyProtocolConnectionState = wrapperspb.Bool(false)
		}},
		{"http_protocol_options.allow_absolute_url", func(h *hcmv3.HttpConnectionManager) {
			h.HttpProtocolOptions = &corev3.Http1ProtocolOptions{AllowAbsoluteUrl: wrapperspb.Bool(false)}
		}},
		{"http_protocol_options.header_key_format", func(h *hcmv3.HttpConnectionManager) {
			h.HttpProtocolOptions = &corev3.Http1ProtocolOptions{HeaderKeyFormat: &corev3.Http1ProtocolOptions_HeaderKeyFormat{}}
		}},
		{"http_protocol_options.enable_trailers", func(h *hcmv3.HttpConnectionManager) {
			h.HttpProtocolOptions = &corev3.Http1ProtocolOptions{EnableTrailers: true}
		}},
		{"http_protocol_options.default_host_for_http_10", func(h *hcmv3.HttpConnectionManager) {
			h.HttpProtocolOptions = &corev3.Http1ProtocolOptions{AcceptHttp_10: true, DefaultHostForHttp_10: "a"}
		}},
		{"http2_protocol_options.hpack_table_size", func(h *hcmv3.HttpConnectionManager) {
			h.Http2ProtocolOptions = &corev3.Http2ProtocolOptions{HpackTableSize: wrapperspb.UInt32(0)}
		}},
		{"upgrade_configs[0].filters", func(h *hcmv3.HttpConnectionManager) {
			h.UpgradeConfigs = []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket", Filters: []*hcmv3.HttpFilter{{Name: "x"}}}}
		}},
		{"rds.config_source.authorities", adsWith(func(cs *corev3.ConfigSource) {
			cs.Authorities = []*xdscorev3.Authority{{Name: "a"}}
		})},
		{"rds.config_source.resource_api_version", adsWith(func(cs *corev3.ConfigSource) {
			cs.ResourceApiVersion = corev3.ApiVersion_V2 //nolint:staticcheck // the refused value
		})},
		{"rds.config_source must be {ads: {}}", adsWith(func(cs *corev3.ConfigSource) {
			cs.ConfigSourceSpecifier = &corev3.ConfigSource_Path{Path: "/x"} //nolint:staticcheck // the refused kind
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(hcmConfig(tc.mut), nil)
			if err == nil || !strings.Contains(err.Error(), tc.name) {
				t.Fatalf("got %v, want an error naming %s", err, tc.name)
			}
		})
	}
}

// TestHCMHonouredValuesBehave: the values the audit honours are what the
// proxy does: the path (dot segments, %2F) reaches the upstream as the
// client sent it (normalize_path false, KEEP_UNCHANGED), the upstream's
// Server header is relayed and none is added (PASS_THROUGH), no
// x-envoy-downstream-service-cluster is added (add_user_agent false), an
// HTTP/1.0 request and an absolute-form target are served (accept_http_10,
// allow_absolute_url).
func TestHCMHonouredValuesBehave(t *testing.T) {
	forEachCodec(t, testHCMHonouredValuesBehave)
}

func testHCMHonouredValuesBehave(t *testing.T, codec Codec) {
	var seen struct {
		uri, ua, dsc string
	}
	got := make(chan struct{}, 16)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.uri, seen.ua, seen.dsc = r.RequestURI, r.Header.Get("User-Agent"), r.Header.Get("X-Envoy-Downstream-Service-Cluster")
		if r.URL.Path == "/server" {
			w.Header().Set("Server", "the-upstream")
		}
		got <- struct{}{}
		_, _ = io.WriteString(w, "ok") // a handler's write fails only when the client has gone
	}))
	t.Cleanup(be.Close)
	addr := startH2Proxy(t, codec, []*routev3.Route{prefixRoute("/", "be")}, func(h *hcmv3.HttpConnectionManager) {
		h.NormalizePath = wrapperspb.Bool(false)
		h.PathWithEscapedSlashesAction = hcmv3.HttpConnectionManager_KEEP_UNCHANGED
		h.ServerHeaderTransformation = hcmv3.HttpConnectionManager_PASS_THROUGH
		h.AddUserAgent = wrapperspb.Bool(false)
		h.HttpProtocolOptions = &corev3.Http1ProtocolOptions{AcceptHttp_10: true, AllowAbsoluteUrl: wrapperspb.Bool(true)}
	}, staticCluster("be", be.Listener.Addr().String()))
	wait := func(t *testing.T) {
		t.Helper()
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("the upstream saw no request")
		}
	}
	complete := func(s string) bool { return strings.Contains(s, "\r\n\r\nok") }

	out := rawExchange(t, addr, "GET /a/../b/%2F/./c HTTP/1.1\r\nHost: h\r\n\r\n", complete)
	wait(t)
	if !strings.Contains(out, " 200 ") || seen.uri != "/a/../b/%2F/./c" {
		t.Errorf("upstream saw %q (answer %q), want the path as sent", seen.uri, out)
	}
	if seen.ua != "" || seen.dsc != "" {
		t.Errorf("upstream saw user-agent %q, x-envoy-downstream-service-cluster %q; want neither added", seen.ua, seen.dsc)
	}
	if strings.Contains(strings.ToLower(out), "\r\nserver:") {
		t.Errorf("answer %q carries a Server header the upstream did not send", out)
	}

	out = rawExchange(t, addr, "GET /server HTTP/1.1\r\nHost: h\r\n\r\n", complete)
	wait(t)
	if !strings.Contains(strings.ToLower(out), "\r\nserver: the-upstream\r\n") {
		t.Errorf("answer %q, want the upstream's Server header relayed", out)
	}

	out = rawExchange(t, addr, "GET http://elsewhere/abs HTTP/1.0\r\n\r\n", complete)
	wait(t)
	if !strings.Contains(out, " 200 ") || seen.uri != "/abs" {
		t.Errorf("HTTP/1.0 absolute-form request: upstream saw %q, answer %q", seen.uri, out)
	}

	// HTTP/2 (h2c): the same path and Server header handling.
	resp, err := h2cClient().Get("http://" + addr + "/server/../x/%2F")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	wait(t)
	if resp.StatusCode != 200 || seen.uri != "/server/../x/%2F" || resp.Header.Get("Server") != "" {
		t.Errorf("HTTP/2: upstream saw %q, answer %d with Server %q; want the path as sent and no Server added", seen.uri, resp.StatusCode, resp.Header.Get("Server"))
	}
}

// TestHCMConnectionKeepalive: http2_protocol_options.connection_keepalive
// makes the proxy PING a downstream HTTP/2 connection that has been quiet
// for its interval.
func TestHCMConnectionKeepalive(t *testing.T) {
	addr := startH2Proxy(t, CodecStrait, []*routev3.Route{prefixRoute("/", "be")}, func(h *hcmv3.HttpConnectionManager) {
		h.CodecType = hcmv3.HttpConnectionManager_HTTP2
		h.Http2ProtocolOptions = &corev3.Http2ProtocolOptions{ConnectionKeepalive: &corev3.KeepaliveSettings{
			Interval: durationpb.New(50 * time.Millisecond), Timeout: durationpb.New(10 * time.Second)}}
	}, staticCluster("be", "127.0.0.1:1"))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no PING from the proxy: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := fr.WriteSettingsAck(); err != nil {
					t.Fatal(err)
				}
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				return
			}
		}
	}
}

// TestRouterFilterRefusedFields: each field of the router filter's config,
// set, is an error naming it; Istio's default Router{} builds.
func TestRouterFilterRefusedFields(t *testing.T) {
	withRouter := func(r *routerv3.Router, mut func(hf *hcmv3.HttpFilter)) func(h *hcmv3.HttpConnectionManager) {
		return func(h *hcmv3.HttpConnectionManager) {
			a, err := anypb.New(r)
			if err != nil {
				t.Fatal(err)
			}
			hf := &hcmv3.HttpFilter{Name: routerFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: a}}
			if mut != nil {
				mut(hf)
			}
			h.HttpFilters = []*hcmv3.HttpFilter{hf}
		}
	}
	if _, err := Build(hcmConfig(withRouter(&routerv3.Router{}, nil)), nil); err != nil {
		t.Fatalf("Router{}: %v", err)
	}
	// Every Router field is refused (filters/http/router's audit): the
	// chain builds the router through the registry.
	fields := (&routerv3.Router{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		n := fields.Get(i).Name()
		t.Run(string(n), func(t *testing.T) {
			r := &routerv3.Router{}
			fieldtest.SetSomething(r.ProtoReflect(), fields.ByName(n))
			_, err := Build(hcmConfig(withRouter(r, nil)), nil)
			if err == nil || !strings.Contains(err.Error(), string(n)) {
				t.Fatalf("got %v, want an error naming %s", err, n)
			}
		})
	}
	for name, mut := range map[string]func(hf *hcmv3.HttpFilter){
		"disabled": func(hf *hcmv3.HttpFilter) { hf.Disabled = true },
		"config_discovery": func(hf *hcmv3.HttpFilter) {
			hf.ConfigType = &hcmv3.HttpFilter_ConfigDiscovery{ConfigDiscovery: &corev3.ExtensionConfigSource{}}
		},
		"Router": func(hf *hcmv3.HttpFilter) {
			hf.ConfigType = &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAnyT(t, &corev3.Http1ProtocolOptions{})}
		},
	} {
		_, err := Build(hcmConfig(withRouter(&routerv3.Router{}, mut)), nil)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v, want an error naming it", name, err)
		}
	}
}

// TestHCMUnknownFieldsRefused: a field this build's API does not know (a
// newer Envoy's, kept as unknown bytes when the listener unmarshalled the
// HCM) is refused, in the HCM and in the router filter's config.
func TestHCMUnknownFieldsRefused(t *testing.T) {
	unknown := protowire.AppendVarint(protowire.AppendTag(nil, 9999, protowire.VarintType), 1)
	h := hcmConfig(nil)
	h.ProtoReflect().SetUnknown(unknown)
	if _, err := Build(h, nil); err == nil || !strings.Contains(err.Error(), "does not know") {
		t.Errorf("HCM: got %v, want the unknown field refused", err)
	}
	r := &routerv3.Router{}
	r.ProtoReflect().SetUnknown(unknown)
	h = hcmConfig(func(h *hcmv3.HttpConnectionManager) {
		h.HttpFilters = []*hcmv3.HttpFilter{{Name: routerFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAnyT(t, r)}}}
	})
	if _, err := Build(h, nil); err == nil || !strings.Contains(err.Error(), "does not know") {
		t.Errorf("router: got %v, want the unknown field refused", err)
	}
}
