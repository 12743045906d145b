package hcm

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/fwdheaders"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// recorder is a backend that counts requests per path and reports the
// Host and body of each on seen. Its answers carry an
// access-control-allow-origin of its own, which the CORS filter replaces.
type recorder struct {
	*httptest.Server
	mu     sync.Mutex
	counts map[string]int
	seen   chan seenRequest
}

type seenRequest struct{ host, path, body string }

func newRecorder(t *testing.T) *recorder {
	rec := &recorder{counts: map[string]int{}, seen: make(chan seenRequest, 64)}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.counts[r.URL.Path]++
		rec.mu.Unlock()
		select {
		case rec.seen <- seenRequest{r.Host, r.URL.Path, string(b)}:
		default:
		}
		w.Header().Set("Access-Control-Allow-Origin", "upstream")
		w.Header().Set("X-Upstream", "yes")
		_, _ = io.WriteString(w, "upstream") // a handler's write fails only when the client has gone
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (r *recorder) count(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[path]
}

func mustAnyT(t testing.TB, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func hundred(n uint32) *typev3.FractionalPercent {
	return &typev3.FractionalPercent{Numerator: n, Denominator: typev3.FractionalPercent_HUNDRED}
}

// filterRoutes are the routes of the filter tests, all to cluster "be"
// except where a mirror goes to "shadow".
func filterRoutes(t testing.TB) []*routev3.Route {
	withFault := func(prefix string, f *faultv3.HTTPFault) *routev3.Route {
		r := prefixRoute(prefix, "be")
		r.TypedPerFilterConfig = map[string]*anypb.Any{"envoy.filters.http.fault": mustAnyT(t, f)}
		return r
	}
	withCORS := func(prefix string, c *corsv3.CorsPolicy) *routev3.Route {
		r := prefixRoute(prefix, "be")
		r.TypedPerFilterConfig = map[string]*anypb.Any{"envoy.filters.http.cors": mustAnyT(t, c)}
		return r
	}
	allow := []*matcherv3.StringMatcher{
		{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "https://ok.example"}},
		{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: `https://[a-z]+\.dev\.example`}}},
	}
	mirror := prefixRoute("/mirror", "be")
	mirror.GetRoute().RequestMirrorPolicies = []*routev3.RouteAction_RequestMirrorPolicy{{Cluster: "shadow"}}
	return []*routev3.Route{
		withFault("/abort", &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
			ErrorType: &faultv3.FaultAbort_HttpStatus{HttpStatus: 418}, Percentage: hundred(100)}}),
		withFault("/never", &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
			ErrorType: &faultv3.FaultAbort_HttpStatus{HttpStatus: 418}, Percentage: hundred(0)}}),
		withFault("/grpcabort", &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
			ErrorType: &faultv3.FaultAbort_GrpcStatus{GrpcStatus: 14}, Percentage: hundred(100)}}),
		withFault("/delay", &faultv3.HTTPFault{Delay: &faultcommonv3.FaultDelay{
			FaultDelaySecifier: &faultcommonv3.FaultDelay_FixedDelay{FixedDelay: durationpb.New(300 * time.Millisecond)},
			Percentage:         hundred(100)}}),
		withFault("/header", &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
			ErrorType: &faultv3.FaultAbort_HeaderAbort_{HeaderAbort: &faultv3.FaultAbort_HeaderAbort{}}, Percentage: hundred(100)}}),
		withCORS("/cors", &corsv3.CorsPolicy{AllowOriginStringMatch: allow, AllowMethods: "GET,POST",
			AllowHeaders: "x-custom", ExposeHeaders: "x-upstream", MaxAge: "600", AllowCredentials: wrapperspb.Bool(true)}),
		withCORS("/strict", &corsv3.CorsPolicy{AllowOriginStringMatch: allow, AllowMethods: "*",
			ForwardNotMatchingPreflights: wrapperspb.Bool(false)}),
		mirror,
		prefixRoute("/", "be"),
	}
}

func withFilters(t testing.TB) func(*hcmv3.HttpConnectionManager) {
	return func(h *hcmv3.HttpConnectionManager) {
		h.HttpFilters = append([]*hcmv3.HttpFilter{
			{Name: "envoy.filters.http.fault", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAnyT(t, &faultv3.HTTPFault{})}},
			{Name: "envoy.filters.http.cors", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAnyT(t, &corsv3.Cors{})}},
		}, h.HttpFilters...)
	}
}

type filterCase struct {
	name   string
	method string
	path   string
	header map[string]string
	body   string
	check  func(t *testing.T, resp *http.Response, body string)
}

// TestHTTPFilters runs the fault and CORS filters and request mirroring on
// every request path: the HTTP/1.1 codec, net/http, and HTTP/2 (h2c).
func TestHTTPFilters(t *testing.T) {
	be := newRecorder(t)
	shadow := newRecorder(t)
	beAddr := strings.TrimPrefix(be.URL, "http://")
	shadowAddr := strings.TrimPrefix(shadow.URL, "http://")
	cases := []filterCase{
		{name: "abort", path: "/abort/x", check: func(t *testing.T, resp *http.Response, body string) {
			if resp.StatusCode != 418 || body != "fault filter abort" || resp.Header.Get("X-Strait-Response-Flags") != "FI" {
				t.Errorf("got %d %q flags %q, want 418 \"fault filter abort\" FI", resp.StatusCode, body, resp.Header.Get("X-Strait-Response-Flags"))
			}
			if n := be.count("/abort/x"); n != 0 {
				t.Errorf("the backend saw %d aborted requests", n)
			}
		}},
		{name: "abort at 0 percent", path: "/never", check: wantUpstream},
		{name: "header abort", path: "/header", header: map[string]string{"x-envoy-fault-abort-request": "451"}, check: wantStatus(451)},
		{name: "header abort without header", path: "/header", check: wantUpstream},
		{name: "delay", path: "/delay", check: func(t *testing.T, resp *http.Response, body string) {
			wantUpstream(t, resp, body)
			if f := resp.Header.Get("X-Strait-Response-Flags"); f != "DI" {
				t.Errorf("flags %q, want DI", f)
			}
		}},
		{name: "preflight allowed", method: "OPTIONS", path: "/cors", header: map[string]string{
			"Origin": "https://ok.example", "Access-Control-Request-Method": "POST"},
			check: func(t *testing.T, resp *http.Response, body string) {
				want := map[string]string{"Access-Control-Allow-Origin": "https://ok.example", "Access-Control-Allow-Methods": "GET,POST",
					"Access-Control-Allow-Headers": "x-custom", "Access-Control-Max-Age": "600", "Access-Control-Allow-Credentials": "true", "X-Upstream": ""}
				wantHeaders(t, resp, 200, want)
			}},
		{name: "preflight regex origin", method: "OPTIONS", path: "/cors", header: map[string]string{
			"Origin": "https://abc.dev.example", "Access-Control-Request-Method": "GET"},
			check: func(t *testing.T, resp *http.Response, body string) {
				wantHeaders(t, resp, 200, map[string]string{"Access-Control-Allow-Origin": "https://abc.dev.example", "X-Upstream": ""})
			}},
		{name: "preflight refused is forwarded", method: "OPTIONS", path: "/cors", header: map[string]string{
			"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
			check: func(t *testing.T, resp *http.Response, body string) {
				wantHeaders(t, resp, 200, map[string]string{"Access-Control-Allow-Origin": "upstream", "X-Upstream": "yes"})
			}},
		{name: "preflight refused is answered", method: "OPTIONS", path: "/strict", header: map[string]string{
			"Origin": "https://evil.example", "Access-Control-Request-Method": "PUT"},
			check: func(t *testing.T, resp *http.Response, body string) {
				wantHeaders(t, resp, 200, map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Allow-Methods": "PUT", "X-Upstream": ""})
			}},
		{name: "actual request allowed", path: "/cors", header: map[string]string{"Origin": "https://ok.example"},
			check: func(t *testing.T, resp *http.Response, body string) {
				wantHeaders(t, resp, 200, map[string]string{"Access-Control-Allow-Origin": "https://ok.example",
					"Access-Control-Expose-Headers": "x-upstream", "Access-Control-Allow-Credentials": "true", "X-Upstream": "yes"})
				if n := len(resp.Header.Values("Access-Control-Allow-Origin")); n != 1 {
					t.Errorf("%d access-control-allow-origin fields, want the upstream's replaced", n)
				}
			}},
		{name: "actual request refused", path: "/cors", header: map[string]string{"Origin": "https://evil.example"},
			check: func(t *testing.T, resp *http.Response, body string) {
				wantHeaders(t, resp, 200, map[string]string{"Access-Control-Allow-Origin": "upstream", "Access-Control-Expose-Headers": ""})
			}},
		{name: "mirror", method: "POST", path: "/mirror/p", body: "payload", check: func(t *testing.T, resp *http.Response, body string) {
			wantUpstream(t, resp, body)
			select {
			case s := <-shadow.seen:
				if s.host != "svc.example-shadow:80" || s.path != "/mirror/p" || s.body != "payload" {
					t.Errorf("shadow saw host %q path %q body %q, want svc.example-shadow:80, /mirror/p, payload", s.host, s.path, s.body)
				}
			case <-time.After(5 * time.Second):
				t.Error("the shadow got no request")
			}
		}},
	}
	for _, codec := range codecs {
		addr := startH2Proxy(t, codec, filterRoutes(t), withFilters(t),
			staticCluster("be", beAddr), staticCluster("shadow", shadowAddr))
		for _, cl := range []struct {
			name string
			c    *http.Client
		}{{"http1", &http.Client{Timeout: 10 * time.Second}}, {"h2c", h2cClient()}} {
			for _, tc := range cases {
				t.Run(string(codec)+"/"+cl.name+"/"+tc.name, func(t *testing.T) {
					method := tc.method
					if method == "" {
						method = "GET"
					}
					var body io.Reader
					if tc.body != "" {
						body = strings.NewReader(tc.body)
					}
					req, err := http.NewRequest(method, "http://"+addr+tc.path, body)
					if err != nil {
						t.Fatal(err)
					}
					req.Host = "svc.example:80"
					for k, v := range tc.header {
						req.Header.Set(k, v)
					}
					start := time.Now()
					resp, err := cl.c.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if tc.name == "delay" && time.Since(start) < 300*time.Millisecond {
						t.Errorf("answered after %v, before the 300ms delay", time.Since(start))
					}
					tc.check(t, resp, string(b))
				})
			}
		}
	}
}

func wantUpstream(t *testing.T, resp *http.Response, body string) {
	t.Helper()
	if resp.StatusCode != 200 || body != "upstream" {
		t.Errorf("got %d %q, want the upstream's 200", resp.StatusCode, body)
	}
}

func wantStatus(code int) func(t *testing.T, resp *http.Response, body string) {
	return func(t *testing.T, resp *http.Response, body string) {
		t.Helper()
		if resp.StatusCode != code {
			t.Errorf("status %d, want %d", resp.StatusCode, code)
		}
	}
}

// wantHeaders checks the status and headers; "" means absent.
func wantHeaders(t *testing.T, resp *http.Response, code int, want map[string]string) {
	t.Helper()
	if resp.StatusCode != code {
		t.Errorf("status %d, want %d", resp.StatusCode, code)
	}
	for k, v := range want {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
}

// TestGRPCFaultAbort: an abort with a gRPC status answers a gRPC request
// in gRPC's trailers-only form, HTTP 200 with grpc-status, on HTTP/2.
func TestGRPCFaultAbort(t *testing.T) {
	be := newRecorder(t)
	addr := startH2Proxy(t, CodecStrait, filterRoutes(t), withFilters(t), staticCluster("be", strings.TrimPrefix(be.URL, "http://")))
	req, _ := http.NewRequest("POST", "http://"+addr+"/grpcabort/svc.Method", strings.NewReader("\x00\x00\x00\x00\x00"))
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	resp, err := h2cClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
	resp.Body.Close()
	st := resp.Header.Get("Grpc-Status")
	if st == "" {
		st = resp.Trailer.Get("Grpc-Status")
	}
	if resp.StatusCode != 200 || st != "14" || resp.Header.Get("X-Strait-Response-Flags") != "FI" {
		t.Errorf("got HTTP %d grpc-status %q flags %q, want 200, 14 (UNAVAILABLE), FI", resp.StatusCode, st, resp.Header.Get("X-Strait-Response-Flags"))
	}
	if be.count("/grpcabort/svc.Method") != 0 {
		t.Error("the aborted call reached the backend")
	}
}

// TestHTTPFilterRefusals: filter configs strait-proxy does not implement
// are refused, naming the field.
func TestHTTPFilterRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(h *hcmv3.HttpConnectionManager)
		want string
	}{
		{"fault max_active_faults", func(h *hcmv3.HttpConnectionManager) {
			h.HttpFilters[0].ConfigType = &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAnyT(t, &faultv3.HTTPFault{MaxActiveFaults: wrapperspb.UInt32(3)})}
		}, "max_active_faults"},
		{"fault disabled", func(h *hcmv3.HttpConnectionManager) { h.HttpFilters[0].Disabled = true }, "disabled"},
		{"cors typed_config of another type", func(h *hcmv3.HttpConnectionManager) {
			h.HttpFilters[1].ConfigType = &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAnyT(t, &faultv3.HTTPFault{})}
		}, "envoy.extensions.filters.http.cors.v3.Cors"},
		{"route per-filter config of an unknown filter", func(h *hcmv3.HttpConnectionManager) {
			r := h.GetRouteConfig().VirtualHosts[0].Routes[0]
			r.TypedPerFilterConfig = map[string]*anypb.Any{"envoy.filters.http.lua": mustAnyT(t, &faultv3.HTTPFault{})}
		}, "envoy.filters.http.lua"},
		{"mirror cluster_header", func(h *hcmv3.HttpConnectionManager) {
			r := h.GetRouteConfig().VirtualHosts[0].Routes[0]
			r.GetRoute().RequestMirrorPolicies = []*routev3.RouteAction_RequestMirrorPolicy{{Cluster: "x", ClusterHeader: "x-c"}}
		}, "cluster_header"},
		{"fault headers", func(h *hcmv3.HttpConnectionManager) {
			r := h.GetRouteConfig().VirtualHosts[0].Routes[0]
			r.TypedPerFilterConfig = map[string]*anypb.Any{"envoy.filters.http.fault": mustAnyT(t, &faultv3.HTTPFault{
				Abort:   &faultv3.FaultAbort{ErrorType: &faultv3.FaultAbort_HttpStatus{HttpStatus: 500}},
				Headers: []*routev3.HeaderMatcher{{Name: "x"}}})}
		}, "headers"},
		{"virtual host cors", func(h *hcmv3.HttpConnectionManager) {
			h.GetRouteConfig().VirtualHosts[0].Cors = &routev3.CorsPolicy{}
		}, "cors"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &hcmv3.HttpConnectionManager{
				StatPrefix: "test",
				RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
					Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{prefixRoute("/", "be")}}}}},
				HttpFilters: []*hcmv3.HttpFilter{{Name: routerFilter}},
			}
			withFilters(t)(h)
			tc.mod(h)
			_, err := Build(h, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build: %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// TestFiltersNotTriggeringAllocateNothing: with a fault that does not fire
// and a CORS policy, a request without Origin costs the filters no
// allocation (the benchmark's "configured but not triggering" case).
func TestFiltersNotTriggeringAllocateNothing(t *testing.T) {
	rt := filterRoutes(t)[1] // /never: an abort at 0 %
	rt.TypedPerFilterConfig["envoy.filters.http.cors"] = mustAnyT(t, &corsv3.CorsPolicy{
		AllowOriginStringMatch: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "https://ok.example"}}}})
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: "test",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{rt}}}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: routerFilter}},
	}
	withFilters(t)(h)
	f, err := Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &h1conn{filter: f}
	if err := http1.ParseRequest([]byte("GET /never HTTP/1.1\r\nHost: svc\r\n\r\n"), &c.req); err != nil {
		t.Fatal(err)
	}
	st := &c.stream
	if n := testing.AllocsPerRun(200, func() {
		c.meta.Reset()
		st.begin(c)
		st.rreq = route.Request{Host: "svc", Path: "/never", Method: "GET", Headers: &c.req.Headers}
		if st.decode(st) || st.route() == nil {
			t.Fatal("a filter acted, or no route")
		}
	}); n != 0 {
		t.Errorf("the chain allocates %v times per request", n)
	}
	if rt := st.route(); rt.Filters == nil || len(rt.Filters.PerFilter) != 2 {
		t.Fatalf("the route has no fault and CORS config: %+v", rt.Filters)
	}
}

// testStreamDecode runs f's filter chain on r as the HTTP/2 path does,
// answering into a recorder, and returns the stream and the recorder.
func testStreamDecode(f *Filter, r *http.Request) (*h2stream, *httptest.ResponseRecorder) {
	w := httptest.NewRecorder()
	st := newH2Stream(w, r, &conn{filter: f}, fwdheaders.ClientAddress{}, true)
	st.rreq = route.Request{Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery, Method: r.Method, Scheme: "http", Headers: route.HTTPHeader(r.Header)}
	st.decode(st)
	return st, w
}

// BenchmarkFiltersNotTriggering compares a plain route with one whose
// fault (0 %) and CORS policy are configured but do not act (no Origin),
// through the HTTP/1.1 codec with keep-alive.
func BenchmarkFiltersNotTriggering(b *testing.B) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })) // a handler's write fails only when the client has gone
	b.Cleanup(be.Close)
	t := b
	never := filterRoutes(t)[1]
	never.TypedPerFilterConfig["envoy.filters.http.cors"] = mustAnyT(t, &corsv3.CorsPolicy{
		AllowOriginStringMatch: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "https://ok.example"}}}})
	for _, bc := range []struct {
		name  string
		route *routev3.Route
		mod   func(*hcmv3.HttpConnectionManager)
	}{
		{"plain", prefixRoute("/", "be"), nil},
		{"fault+cors", never, withFilters(t)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			addr := startH2Proxy(b, CodecStrait, []*routev3.Route{bc.route}, bc.mod, staticCluster("be", strings.TrimPrefix(be.URL, "http://")))
			c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			url := "http://" + addr + "/never"
			b.ResetTimer()
			for b.Loop() {
				resp, err := c.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
				resp.Body.Close()
			}
		})
	}
}

// TestFaultDelayEndsWhenClientLeaves: a client that leaves during a fault
// delay ends it; the request never reaches the upstream (both codecs).
func TestFaultDelayEndsWhenClientLeaves(t *testing.T) {
	be := newRecorder(t)
	slow := prefixRoute("/slow", "be")
	slow.TypedPerFilterConfig = map[string]*anypb.Any{"envoy.filters.http.fault": mustAnyT(t, &faultv3.HTTPFault{Delay: &faultcommonv3.FaultDelay{
		FaultDelaySecifier: &faultcommonv3.FaultDelay_FixedDelay{FixedDelay: durationpb.New(time.Second)}, Percentage: hundred(100)}})}
	for _, codec := range codecs {
		addr := startH2Proxy(t, codec, []*routev3.Route{slow}, withFilters(t), staticCluster("be", strings.TrimPrefix(be.URL, "http://")))
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, "GET /slow/"+string(codec)+" HTTP/1.1\r\nHost: x\r\n\r\n") // a failed write shows in what the test reads back
		time.Sleep(50 * time.Millisecond)
		c.Close()
	}
	time.Sleep(1500 * time.Millisecond) // past the delay
	for _, codec := range codecs {
		if n := be.count("/slow/" + string(codec)); n != 0 {
			t.Errorf("%s: the upstream saw the request of a client that left during the delay", codec)
		}
	}
}

// TestMirrorNeverWaitsForTheShadow: the main request completes while its
// shadow is still held by the shadow service, and a shadow that fails
// changes nothing for the client.
func TestMirrorNeverWaitsForTheShadow(t *testing.T) {
	be := newRecorder(t)
	release := make(chan struct{})
	held := make(chan struct{}, 16)
	shadow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held <- struct{}{}
		<-release
		w.WriteHeader(500)
	}))
	t.Cleanup(shadow.Close)
	t.Cleanup(func() { close(release) })
	mirror := prefixRoute("/", "be")
	mirror.GetRoute().RequestMirrorPolicies = []*routev3.RouteAction_RequestMirrorPolicy{
		{Cluster: "shadow"}, {Cluster: "missing"}}
	for _, codec := range codecs {
		addr := startH2Proxy(t, codec, []*routev3.Route{mirror}, withFilters(t),
			staticCluster("be", strings.TrimPrefix(be.URL, "http://")), staticCluster("shadow", strings.TrimPrefix(shadow.URL, "http://")))
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/m")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantUpstream(t, resp, string(b))
		select {
		case <-held:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the shadow never got its copy", codec)
		}
	}
}

// TestFilterStats: the filters count what they do under Envoy's names.
func TestFilterStats(t *testing.T) {
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: "outbound_0.0.0.0_80",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: filterRoutes(t)}}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: routerFilter}},
	}
	withFilters(t)(h)
	f, err := Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := stats.New()
	f.UseStats(st)
	run := func(path, origin string) {
		r := httptest.NewRequest("GET", "http://svc"+path, nil)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		testStreamDecode(f, r)
	}
	run("/abort", "")
	run("/abort", "")
	run("/delay", "")
	run("/cors", "https://ok.example")
	run("/cors", "https://evil.example")
	run("/cors", "https://evil.example")
	run("/cors", "")
	for name, want := range map[string]uint64{
		"http.outbound_0.0.0.0_80.fault.aborts_injected": 2,
		"http.outbound_0.0.0.0_80.fault.delays_injected": 1,
		"http.outbound_0.0.0.0_80.cors.origin_valid":     1,
		"http.outbound_0.0.0.0_80.cors.origin_invalid":   2,
	} {
		if got := st.Counter(name).Load(); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
}

// TestLocalRepliesCarryFilterHeaders: a router local reply (here no
// healthy upstream) to an actual CORS request from an allowed origin gets
// the CORS headers, and after a delay both response flags.
func TestLocalRepliesCarryFilterHeaders(t *testing.T) {
	delayed := prefixRoute("/d", "empty")
	delayed.TypedPerFilterConfig = map[string]*anypb.Any{
		"envoy.filters.http.fault": mustAnyT(t, &faultv3.HTTPFault{Delay: &faultcommonv3.FaultDelay{
			FaultDelaySecifier: &faultcommonv3.FaultDelay_FixedDelay{FixedDelay: durationpb.New(time.Millisecond)}, Percentage: hundred(100)}}),
		"envoy.filters.http.cors": mustAnyT(t, &corsv3.CorsPolicy{
			AllowOriginStringMatch: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "https://ok.example"}}}}),
	}
	for _, codec := range codecs {
		addr := startH2Proxy(t, codec, []*routev3.Route{delayed, prefixRoute("/", "empty")}, withFilters(t), staticCluster("empty"))
		for _, cl := range []*http.Client{{Timeout: 10 * time.Second}, h2cClient()} {
			c := cl
			get := func(path string) *http.Response {
				req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
				req.Header.Set("Origin", "https://ok.example")
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp
			}
			resp := get("/d")
			if resp.StatusCode != 503 || resp.Header.Get("Access-Control-Allow-Origin") != "https://ok.example" || resp.Header.Get("X-Strait-Response-Flags") != "DI,UH" {
				t.Errorf("%s: %d allow-origin %q flags %q; want 503, the origin, DI,UH", codec, resp.StatusCode,
					resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Get("X-Strait-Response-Flags"))
			}
			// The next request on the connection has no CORS policy: no
			// header is left over.
			resp = get("/other")
			if resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.Header.Get("X-Strait-Response-Flags") != "UH" {
				t.Errorf("%s: next request got allow-origin %q flags %q", codec, resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Get("X-Strait-Response-Flags"))
			}
		}
	}
}
