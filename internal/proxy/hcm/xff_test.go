package hcm

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// TestXFFRefusals: the client-address fields strait-proxy does not
// implement are refused by name.
func TestXFFRefusals(t *testing.T) {
	for _, tc := range []struct {
		field string
		mod   func(*hcmv3.HttpConnectionManager)
	}{
		{"original_ip_detection_extensions", func(h *hcmv3.HttpConnectionManager) {
			h.OriginalIpDetectionExtensions = []*corev3.TypedExtensionConfig{{Name: "envoy.http.original_ip_detection.xff"}}
		}},
		{"internal_address_config", func(h *hcmv3.HttpConnectionManager) {
			h.InternalAddressConfig = &hcmv3.HttpConnectionManager_InternalAddressConfig{UnixSockets: true}
		}},
		{"append_x_forwarded_port", func(h *hcmv3.HttpConnectionManager) { h.AppendXForwardedPort = true }},
		{"generate_request_id", func(h *hcmv3.HttpConnectionManager) { h.GenerateRequestId = wrapperspb.Bool(false) }},
		{"request_id_extension", func(h *hcmv3.HttpConnectionManager) {
			h.RequestIdExtension = &hcmv3.RequestIDExtension{TypedConfig: &anypb.Any{TypeUrl: "type.googleapis.com/example.RequestID"}}
		}},
		{"always_set_request_id_in_response", func(h *hcmv3.HttpConnectionManager) { h.AlwaysSetRequestIdInResponse = true }},
	} {
		h := xffHCM(t, tc.mod)
		if _, err := Build(h, nil); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: Build error %v, want one naming the field", tc.field, err)
		}
	}
	if _, err := Build(xffHCM(t, func(h *hcmv3.HttpConnectionManager) {
		h.UseRemoteAddress, h.XffNumTrustedHops, h.SkipXffAppend = wrapperspb.Bool(true), 2, true
		h.PreserveExternalRequestId, h.GenerateRequestId = true, wrapperspb.Bool(true)
	}), nil); err != nil {
		t.Errorf("the honoured fields: %v", err)
	}
}

func xffHCM(t testing.TB, mod func(*hcmv3.HttpConnectionManager)) *hcmv3.HttpConnectionManager {
	router, _ := anypb.New(&routerv3.Router{})
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: "test",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{
				prefixRoute("/h2", "be2"), prefixRoute("/", "be")}}}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: routerFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	}
	if mod != nil {
		mod(h)
	}
	return h
}

// TestXFFThroughHCM sends requests over real sockets through HCMs with
// each client-address policy, on every request path (HTTP/1.1 and h2c
// clients, both codecs, HTTP/1.1 and HTTP/2 upstreams), and checks what
// the upstream sees (x-forwarded-for, x-envoy-external-address,
// x-envoy-internal and the other x-envoy-* headers, whether x-request-id
// is the client's), what an RBAC remote_ip rule decides and what the
// access log prints as %DOWNSTREAM_REMOTE_ADDRESS%.
func TestXFFThroughHCM(t *testing.T) {
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hv := func(name string) string {
			if vv, ok := r.Header[name]; ok {
				return strings.Join(vv, "|")
			}
			return "-"
		}
		rid := "new"
		if strings.HasPrefix(r.Header.Get("X-Request-Id"), "client-") {
			rid = "kept"
		}
		var envoy []string // the other x-envoy-* headers
		for k := range r.Header {
			if strings.HasPrefix(k, "X-Envoy-") && k != "X-Envoy-External-Address" && k != "X-Envoy-Internal" {
				envoy = append(envoy, k)
			}
		}
		sort.Strings(envoy)
		if len(envoy) == 0 {
			envoy = []string{"-"}
		}
		fmt.Fprintf(w, "xff=%s ext=%s int=%s rid=%s envoy=%s", hv("X-Forwarded-For"), hv("X-Envoy-External-Address"), hv("X-Envoy-Internal"), rid, strings.Join(envoy, ","))
	}))
	be.Config.Protocols = new(http.Protocols)
	be.Config.Protocols.SetHTTP1(true)
	be.Config.Protocols.SetUnencryptedHTTP2(true)
	be.Start()
	defer be.Close()
	beAddr := be.Listener.Addr().String()

	dir := t.TempDir()
	files := accesslog.NewFiles(accesslog.FilesOptions{FlushInterval: time.Hour})
	defer files.Close()
	log := slog.New(slog.DiscardHandler)
	cm := cluster.NewManager(log, stats.New())
	if err := cm.AddStatic([]*clusterv3.Cluster{staticCluster("be", beAddr), h2Cluster(t, "be2", beAddr)}); err != nil {
		t.Fatal(err)
	}
	// Only clients in 203.0.113.0/24 are allowed.
	allow := rbacFilter(t, &rbachttpv3.RBAC{Rules: &rbacv3.RBAC{Action: rbacv3.RBAC_ALLOW, Policies: map[string]*rbacv3.Policy{
		"net": {Permissions: []*rbacv3.Permission{rbacAnyPerm}, Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_RemoteIp{
			RemoteIp: &corev3.CidrRange{AddressPrefix: "203.0.113.0", PrefixLen: wrapperspb.UInt32(24)}}}}},
	}}})
	local := netip.MustParseAddr("192.0.2.1") // what the proxy appends for its loopback peers

	start := func(t *testing.T, codec Codec, name string, mod func(*hcmv3.HttpConnectionManager)) string {
		fl, err := anypb.New(&filev3.FileAccessLog{Path: filepath.Join(dir, name+".log"), AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_TextFormat{TextFormat: "%REQ(X-TEST-ID)% remote=%DOWNSTREAM_REMOTE_ADDRESS% direct=%DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT%\n"}}}})
		if err != nil {
			t.Fatal(err)
		}
		logs, err := accesslog.Build([]*accesslogv3.AccessLog{{Name: accesslog.FileLoggerName, ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: fl}}}, files)
		if err != nil {
			t.Fatal(err)
		}
		h := xffHCM(t, mod)
		h.HttpFilters = append([]*hcmv3.HttpFilter{allow}, h.HttpFilters...)
		f, err := Build(h, nil)
		if err != nil {
			t.Fatal(err)
		}
		f.AccessLog = logs
		s := NewServer(Options{Logger: log, Clusters: cm, Codec: codec, LocalAddress: local})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				s.ServeConn(c, f, netip.AddrPort{}, cluster.OriginalSource{})
			}
		}()
		t.Cleanup(func() { ln.Close(); s.Close() })
		return ln.Addr().String()
	}
	logLine := func(t *testing.T, name, id string) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			files.Flush()
			data, _ := os.ReadFile(filepath.Join(dir, name+".log"))
			for _, l := range strings.Split(string(data), "\n") {
				if strings.HasPrefix(l, id+" ") {
					return strings.TrimPrefix(l, id+" ")
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("no access log line for %s", id)
		return ""
	}

	type request struct {
		name   string
		header map[string]string
		code   int
		body   string // the upstream's view, for a 200
		remote string // the access log's %DOWNSTREAM_REMOTE_ADDRESS%
	}
	// What a client should not decide: stripped from external requests
	// (ip-tags, internal) or at the edge (the decorator), or set at the edge
	// (external-address).
	spoof := map[string]string{"X-Envoy-Internal": "true", "X-Envoy-External-Address": "203.0.113.250",
		"X-Envoy-Ip-Tags": "t", "X-Envoy-Decorator-Operation": "op", "X-Envoy-Foo": "kept"}
	with := func(xff string, extra map[string]string) map[string]string {
		m := map[string]string{"X-Forwarded-For": xff}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	policies := []struct {
		name string
		mod  func(*hcmv3.HttpConnectionManager)
		reqs []request
	}{
		{"transparent", nil, []request{
			{"last entry allowed", with("198.51.100.1, 203.0.113.9", spoof), 200, "xff=198.51.100.1, 203.0.113.9 ext=203.0.113.250 int=- rid=kept envoy=X-Envoy-Decorator-Operation,X-Envoy-Foo", "203.0.113.9:0"},
			{"last entry denied", with("203.0.113.9, 198.51.100.1", nil), 403, "", "198.51.100.1:0"},
			{"no header: the peer", nil, 403, "", "127.0.0.1:"},
		}},
		{"trusted-hop", func(h *hcmv3.HttpConnectionManager) { h.XffNumTrustedHops = 1 }, []request{
			{"second from the right", with("203.0.113.9, 198.51.100.1", nil), 200, "xff=203.0.113.9, 198.51.100.1 ext=- int=- rid=kept envoy=-", "203.0.113.9:0"},
			{"short list: the peer", with("203.0.113.9", nil), 403, "", "127.0.0.1:"},
		}},
		{"edge", func(h *hcmv3.HttpConnectionManager) { h.UseRemoteAddress = wrapperspb.Bool(true) }, []request{
			{"the peer, whatever the header", with("203.0.113.9", nil), 403, "", "127.0.0.1:"},
		}},
		{"edge-trusted-hop", func(h *hcmv3.HttpConnectionManager) {
			h.UseRemoteAddress, h.XffNumTrustedHops = wrapperspb.Bool(true), 1
		}, []request{
			{"appended", with("198.51.100.1, 203.0.113.9", spoof), 200, "xff=198.51.100.1, 203.0.113.9,192.0.2.1 ext=203.0.113.9 int=- rid=new envoy=X-Envoy-Foo", "203.0.113.9:0"},
			{"denied", with("203.0.113.9, 198.51.100.1", nil), 403, "", "198.51.100.1:0"},
		}},
		{"edge-skip-preserve", func(h *hcmv3.HttpConnectionManager) {
			h.UseRemoteAddress, h.XffNumTrustedHops, h.SkipXffAppend = wrapperspb.Bool(true), 1, true
			h.PreserveExternalRequestId = true
		}, []request{
			{"not appended, request id kept", with("203.0.113.9", nil), 200, "xff=203.0.113.9 ext=203.0.113.9 int=- rid=kept envoy=-", "203.0.113.9:0"},
		}},
	}
	n := 0
	for _, codec := range codecs {
		for _, pol := range policies {
			name := string(codec) + "-" + pol.name
			addr := start(t, codec, name, pol.mod)
			for _, cl := range []struct {
				name string
				c    *http.Client
			}{{"http1", &http.Client{Timeout: 10 * time.Second}}, {"h2c", h2cClient()}} {
				for _, path := range []string{"/h1", "/h2"} {
					for _, rq := range pol.reqs {
						t.Run(name+"/"+cl.name+path+"/"+rq.name, func(t *testing.T) {
							n++
							id := fmt.Sprintf("xff-%d", n)
							req, err := http.NewRequest("GET", "http://"+addr+path, nil)
							if err != nil {
								t.Fatal(err)
							}
							req.Header.Set("X-Test-Id", id)
							req.Header.Set("X-Request-Id", "client-"+id)
							for k, v := range rq.header {
								req.Header.Set(k, v)
							}
							resp, err := cl.c.Do(req)
							if err != nil {
								t.Fatal(err)
							}
							b, _ := io.ReadAll(resp.Body)
							resp.Body.Close()
							if resp.StatusCode != rq.code || (rq.code == 200 && string(b) != rq.body) {
								t.Errorf("got %d %q, want %d %q", resp.StatusCode, b, rq.code, rq.body)
							}
							line := logLine(t, name, id)
							if !strings.HasPrefix(line, "remote="+rq.remote) || !strings.HasSuffix(line, " direct=127.0.0.1") {
								t.Errorf("access log %q, want remote=%s… direct=127.0.0.1", line, rq.remote)
							}
						})
					}
				}
			}
		}
	}
}
