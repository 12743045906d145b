package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
)

// rtStall answers nothing until the request is cancelled (or 10 s).
func rtStall(n int, w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
}

// rtReset closes the connection without a response.
func rtReset(_ int, w http.ResponseWriter, _ *http.Request) {
	c, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		c.Close()
	}
}

// rtThen answers attempt 1 with first and the others with rest.
func rtThen(first, rest func(int, http.ResponseWriter, *http.Request)) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			first(n, w, r)
			return
		}
		rest(n, w, r)
	}
}

type rtCounts struct{ retry, success, limit, timeout, perTry uint64 }

// TestRTRoundTrip drives RoundTrip against loopback backends and checks
// the response or local failure, the attempts the backend saw and the
// router's counters.
func TestRTRoundTrip(t *testing.T) {
	ms := durationpb.New
	pertry := func(p *routev3.RetryPolicy, d time.Duration) *routev3.RetryPolicy { p.PerTryTimeout = ms(d); return p }
	codes := func(p *routev3.RetryPolicy, c ...uint32) *routev3.RetryPolicy { p.RetriableStatusCodes = c; return p }
	cases := []struct {
		name     string
		answer   func(int, http.ResponseWriter, *http.Request)
		action   *routev3.RouteAction
		attempts bool              // include_request_attempt_count
		header   map[string]string // request headers
		refused  bool              // the endpoint refuses connections
		status   int               // response status (0: a local failure)
		body     string
		fail     Failure
		limit    bool // LimitExceeded
		seen     int  // attempts the backend saw
		counts   []string
		c        rtCounts
	}{
		{name: "ok", answer: rtStatus(0, 0), status: 200, body: "ok 1", seen: 1, counts: []string{""}},
		{name: "no policy 503", answer: rtStatus(9, 503), status: 503, body: "fail 1", seen: 1, counts: []string{""}},
		{name: "5xx retried", answer: rtStatus(2, 503), action: &routev3.RouteAction{RetryPolicy: rtRetryPolicy("5xx", 2)}, attempts: true,
			status: 200, body: "ok 3", seen: 3, counts: []string{"1", "2", "3"}, c: rtCounts{retry: 2, success: 1}},
		{name: "5xx exhausted", answer: rtStatus(9, 502), action: &routev3.RouteAction{RetryPolicy: rtRetryPolicy("5xx", 2)}, attempts: true,
			status: 502, body: "fail 3", limit: true, seen: 3, counts: []string{"1", "2", "3"}, c: rtCounts{retry: 2, limit: 1}},
		{name: "5xx not on 404", answer: rtStatus(9, 404), action: &routev3.RouteAction{RetryPolicy: rtRetryPolicy("5xx", 2)},
			status: 404, body: "fail 1", seen: 1, counts: []string{""}},
		{name: "retriable status", answer: rtStatus(1, 418), action: &routev3.RouteAction{RetryPolicy: codes(rtRetryPolicy("retriable-status-codes", 1), 418)},
			status: 200, body: "ok 2", seen: 2, counts: []string{"", ""}, c: rtCounts{retry: 1, success: 1}},
		{name: "max retries header", answer: rtStatus(1, 503), action: &routev3.RouteAction{RetryPolicy: rtRetryPolicy("5xx", 0)},
			header: map[string]string{"X-Envoy-Max-Retries": "1"}, attempts: true,
			status: 200, body: "ok 2", seen: 2, counts: []string{"1", "2"}, c: rtCounts{retry: 1, success: 1}},
		{name: "retry on header", answer: rtStatus(1, 503), header: map[string]string{"X-Envoy-Retry-On": "5xx", "X-Envoy-Max-Retries": "1"},
			status: 200, body: "ok 2", seen: 2, counts: []string{"", ""}, c: rtCounts{retry: 1, success: 1}},
		{name: "grpc unavailable", answer: func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 1 {
				w.Header().Set("Grpc-Status", "14")
			}
			fmt.Fprint(w, "g"+strconv.Itoa(n))
		}, action: &routev3.RouteAction{RetryPolicy: rtRetryPolicy("unavailable", 1)},
			status: 200, body: "g2", seen: 2, counts: []string{"", ""}, c: rtCounts{retry: 1, success: 1}},
		{name: "grpc cancelled without grpc-status", answer: rtStatus(0, 0), action: &routev3.RouteAction{RetryPolicy: rtRetryPolicy("cancelled", 1)},
			status: 200, body: "ok 1", seen: 1, counts: []string{""}},
		{name: "grpc-status not a number", answer: func(n int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Grpc-Status", "x1")
			fmt.Fprint(w, "g"+strconv.Itoa(n))
		}, action: &routev3.RouteAction{RetryPolicy: rtRetryPolicy("cancelled,unavailable,internal,deadline-exceeded,resource-exhausted", 1)},
			status: 200, body: "g1", seen: 1, counts: []string{""}},
		{name: "connect failure", refused: true, fail: FailConnect},
		{name: "connect failure retried", refused: true, action: &routev3.RouteAction{RetryPolicy: rtRetryPolicy("connect-failure", 2)},
			fail: FailConnect, limit: true, c: rtCounts{retry: 2, limit: 1}},
		{name: "connect failure not on reset", refused: true, action: &routev3.RouteAction{RetryPolicy: rtRetryPolicy("retriable-status-codes", 2)},
			fail: FailConnect},
		{name: "connect failure is reset before request", refused: true, action: &routev3.RouteAction{RetryPolicy: rtRetryPolicy("reset-before-request", 1)},
			fail: FailConnect, limit: true, c: rtCounts{retry: 1, limit: 1}},
		{name: "reset after the request is sent", answer: rtReset, action: &routev3.RouteAction{RetryPolicy: rtRetryPolicy("reset-before-request", 1)},
			fail: FailTerminated, seen: 1, counts: []string{""}},
		{name: "reset", answer: rtReset, fail: FailTerminated, seen: 1, counts: []string{""}},
		{name: "reset retried", answer: rtThen(rtReset, rtStatus(0, 0)), action: &routev3.RouteAction{RetryPolicy: rtRetryPolicy("reset", 1)},
			status: 200, body: "ok 2", seen: 2, counts: []string{"", ""}, c: rtCounts{retry: 1, success: 1}},
		{name: "reset exhausted", answer: rtReset, action: &routev3.RouteAction{RetryPolicy: rtRetryPolicy("reset", 1)},
			fail: FailTerminated, limit: true, seen: 2, counts: []string{"", ""}, c: rtCounts{retry: 1, limit: 1}},
		{name: "head past the limits", answer: func(n int, w http.ResponseWriter, _ *http.Request) {
			for i := range cluster.MaxResponseHeaders + 1 {
				w.Header().Set("X-H"+strconv.Itoa(i), "v")
			}
			fmt.Fprint(w, "big head")
		}, action: &routev3.RouteAction{RetryPolicy: rtRetryPolicy("5xx,reset", 2)},
			fail: FailProtocol, limit: true, seen: 3, counts: []string{"", "", ""}, c: rtCounts{retry: 2, limit: 1}},
		{name: "route timeout", answer: rtStall, action: &routev3.RouteAction{Timeout: ms(150 * time.Millisecond)},
			fail: FailRouteTimeout, seen: 1, counts: []string{""}, c: rtCounts{timeout: 1}},
		{name: "route timeout header", answer: rtStall, header: map[string]string{"X-Envoy-Upstream-Rq-Timeout-Ms": "150"},
			fail: FailRouteTimeout, seen: 1, counts: []string{""}, c: rtCounts{timeout: 1}},
		{name: "per-try timeout retried", answer: rtThen(rtStall, rtStatus(0, 0)),
			action:   &routev3.RouteAction{Timeout: ms(0), RetryPolicy: pertry(rtRetryPolicy("5xx", 1), 150*time.Millisecond)},
			attempts: true, status: 200, body: "ok 2", seen: 2, counts: []string{"1", "2"}, c: rtCounts{retry: 1, success: 1, perTry: 1}},
		{name: "per-try timeout exhausted", answer: rtStall,
			action: &routev3.RouteAction{Timeout: ms(0), RetryPolicy: pertry(rtRetryPolicy("5xx", 1), 150*time.Millisecond)},
			fail:   FailRouteTimeout, limit: true, seen: 2, counts: []string{"", ""}, c: rtCounts{retry: 1, limit: 1, perTry: 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var addr string
			var be *rtBackend
			if tc.refused {
				addr = rtRefused(t)
			} else {
				be = rtServe(t, tc.answer)
				addr = be.addr()
			}
			cl := rtCluster(t, nil, addr)
			rt := rtRoute(t, tc.action, tc.attempts)
			req, _ := http.NewRequest("GET", "http://be.test/", nil)
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			x, body := rtSend(t, cl, rt, req)
			if tc.status != 0 {
				if x.Resp == nil {
					t.Fatalf("no response: %v %v", x.Fail, x.Err)
				}
				if x.Resp.StatusCode != tc.status || body != tc.body {
					t.Errorf("response %d %q, want %d %q", x.Resp.StatusCode, body, tc.status, tc.body)
				}
			} else {
				if x.Resp != nil {
					t.Fatalf("response %d, want failure %v", x.Resp.StatusCode, tc.fail)
				}
				if x.Fail != tc.fail || x.Err == nil {
					t.Errorf("failure %v (err %v), want %v with an error", x.Fail, x.Err, tc.fail)
				}
			}
			if x.LimitExceeded != tc.limit {
				t.Errorf("LimitExceeded %v, want %v", x.LimitExceeded, tc.limit)
			}
			if be != nil {
				be.mu.Lock()
				got := strings.Join(be.counts, ",")
				be.mu.Unlock()
				if got != strings.Join(tc.counts, ",") || be.attempts() != tc.seen {
					t.Errorf("backend saw %d attempts, attempt counts %q; want %d %q", be.attempts(), got, tc.seen, strings.Join(tc.counts, ","))
				}
			}
			for _, h := range []string{"X-Envoy-Max-Retries", "X-Envoy-Retry-On", "X-Envoy-Upstream-Rq-Timeout-Ms"} {
				if req.Header.Get(h) != "" {
					t.Errorf("%s left in the request", h)
				}
			}
			r := &cl.Stats.Router
			got := rtCounts{r.Retry.Load(), r.RetrySuccess.Load(), r.RetryLimitExceeded.Load(), r.Timeout.Load(), r.PerTryTimeout.Load()}
			if got != tc.c {
				t.Errorf("counters %+v, want %+v", got, tc.c)
			}
		})
	}
}

// TestRTBodies: a retry sends the request body again, from GetBody or
// from what the first attempt's read recorded, up to RetryBufferLimit.
func TestRTBodies(t *testing.T) {
	small := "payload"
	big := strings.Repeat("b", RetryBufferLimit+1)
	cases := []struct {
		name   string
		body   func() io.Reader // nil: no body
		whole  bool             // GetBody set
		bodies []string
		status int
	}{
		{"no body", nil, false, []string{"", ""}, 200},
		{"whole", func() io.Reader { return strings.NewReader(small) }, true, []string{small, small}, 200},
		{"streamed", func() io.Reader { return strings.NewReader(small) }, false, []string{small, small}, 200},
		{"streamed at the limit", func() io.Reader { return strings.NewReader(big[1:]) }, false, []string{big[1:], big[1:]}, 200},
		{"streamed past the limit", func() io.Reader { return strings.NewReader(big) }, false, []string{big}, 503},
		{"whole past the limit", func() io.Reader { return strings.NewReader(big) }, true, []string{big, big}, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			be := rtServe(t, rtStatus(1, 503))
			cl := rtCluster(t, nil, be.addr())
			rt := rtRoute(t, &routev3.RouteAction{RetryPolicy: rtRetryPolicy("5xx", 1)}, false)
			req, _ := http.NewRequest("POST", "http://be.test/", nil)
			gets := 0
			if tc.body != nil {
				req.Body = io.NopCloser(tc.body())
				if tc.whole {
					req.GetBody = func() (io.ReadCloser, error) { gets++; return io.NopCloser(tc.body()), nil }
				}
			}
			x, _ := rtSend(t, cl, rt, req)
			if x.Resp == nil || x.Resp.StatusCode != tc.status {
				t.Fatalf("exchange %+v, want status %d", x, tc.status)
			}
			if wantGets := len(tc.bodies) - 1; tc.whole && gets != wantGets {
				t.Errorf("GetBody called %d times, want once per retry (%d)", gets, wantGets)
			}
			be.mu.Lock()
			defer be.mu.Unlock()
			if len(be.bodies) != len(tc.bodies) {
				t.Fatalf("backend saw %d attempts, want %d", len(be.bodies), len(tc.bodies))
			}
			for i := range tc.bodies {
				if be.bodies[i] != tc.bodies[i] {
					t.Errorf("attempt %d: body of %d bytes, want %d", i+1, len(be.bodies[i]), len(tc.bodies[i]))
				}
			}
		})
	}
}

// TestRTGetBodyError: a retry whose body can't be had again ends the
// exchange as a connection termination, its error kept.
func TestRTGetBodyError(t *testing.T) {
	be := rtServe(t, rtStatus(1, 503))
	cl := rtCluster(t, nil, be.addr())
	rt := rtRoute(t, &routev3.RouteAction{RetryPolicy: rtRetryPolicy("5xx", 1)}, false)
	req, _ := http.NewRequest("POST", "http://be.test/", strings.NewReader("x"))
	errGone := errors.New("body gone")
	req.GetBody = func() (io.ReadCloser, error) { return nil, errGone }
	x, _ := rtSend(t, cl, rt, req)
	if x.Resp != nil || x.Fail != FailTerminated || !errors.Is(x.Err, errGone) || be.attempts() != 1 {
		t.Errorf("exchange resp %v fail %v err %v after %d attempts; want UC with the GetBody error after 1", x.Resp, x.Fail, x.Err, be.attempts())
	}
}

// TestRTDownstreamContext: a request whose own context ends is a client
// gone (DC), or 504 UT when its deadline passed, not a route timeout.
func TestRTDownstreamContext(t *testing.T) {
	for _, deadline := range []bool{false, true} {
		t.Run("deadline="+strconv.FormatBool(deadline), func(t *testing.T) {
			be := rtServe(t, rtStall)
			cl := rtCluster(t, nil, be.addr())
			rt := rtRoute(t, &routev3.RouteAction{Timeout: durationpb.New(0), RetryPolicy: rtRetryPolicy("reset,5xx", 3)}, false)
			ctx, cancel := context.WithCancel(context.Background())
			if deadline {
				ctx, cancel = context.WithTimeout(context.Background(), 150*time.Millisecond)
			} else {
				time.AfterFunc(150*time.Millisecond, cancel)
			}
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://be.test/", nil)
			x, _ := rtSend(t, cl, rt, req)
			want := FailClientGone
			if deadline {
				want = Failure{504, "UT", "upstream request timeout"}
			}
			r := &cl.Stats.Router
			if x.Resp != nil || x.Fail != want || x.Err == nil || r.Timeout.Load() != 0 || r.Retry.Load() != 0 || x.LimitExceeded {
				t.Errorf("exchange fail %v err %v limit %v, timeouts %d retries %d; want %v and no counters", x.Fail, x.Err, x.LimitExceeded, r.Timeout.Load(), r.Retry.Load(), want)
			}
		})
	}
}

// TestRTOverflow: an open circuit breaker is 503 UO, not retried; a
// retry the retry breaker refuses is not sent.
func TestRTOverflow(t *testing.T) {
	be := rtServe(t, rtStatus(9, 503))
	cl := rtCluster(t, func(c *clusterv3.Cluster) {
		c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
			Priority: corev3.RoutingPriority_DEFAULT, MaxConnections: wrapperspb.UInt32(0), MaxPendingRequests: wrapperspb.UInt32(0), MaxRequests: wrapperspb.UInt32(0)}}}
	}, be.addr())
	rt := rtRoute(t, &routev3.RouteAction{RetryPolicy: rtRetryPolicy("5xx,connect-failure,reset", 2)}, false)
	req, _ := http.NewRequest("GET", "http://be.test/", nil)
	x, _ := rtSend(t, cl, rt, req)
	if x.Resp != nil || x.Fail != (Failure{503, "UO", BodyOverflow}) || !errors.Is(x.Err, cluster.ErrOverflow) || x.LimitExceeded || be.attempts() != 0 || cl.Stats.Router.Retry.Load() != 0 {
		t.Errorf("exchange fail %v err %v limit %v, %d attempts; want 503 UO, not retried", x.Fail, x.Err, x.LimitExceeded, be.attempts())
	}

	be2 := rtServe(t, rtStatus(9, 503))
	cl2 := rtCluster(t, func(c *clusterv3.Cluster) {
		c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
			Priority: corev3.RoutingPriority_DEFAULT, MaxRetries: wrapperspb.UInt32(0)}}}
	}, be2.addr())
	req, _ = http.NewRequest("GET", "http://be.test/", nil)
	x, body := rtSend(t, cl2, rt, req)
	if x.Resp == nil || x.Resp.StatusCode != 503 || body != "fail 1" || be2.attempts() != 1 || cl2.Stats.Router.Retry.Load() != 0 || x.LimitExceeded {
		t.Errorf("retry breaker closed: %v %q after %d attempts, retries %d; want the first 503 unretried", x.Resp, body, be2.attempts(), cl2.Stats.Router.Retry.Load())
	}
}

// TestRTRepick: with the previous_hosts predicate a retry goes to the
// endpoint not tried yet.
func TestRTRepick(t *testing.T) {
	bad := rtServe(t, rtStatus(99, 503))
	good := rtServe(t, rtStatus(0, 0))
	cl := rtCluster(t, nil, bad.addr(), good.addr())
	p := rtRetryPolicy("5xx", 1)
	p.RetryHostPredicate = []*routev3.RetryPolicy_RetryHostPredicate{{Name: "envoy.retry_host_predicates.previous_hosts"}}
	p.HostSelectionRetryMaxAttempts = 5
	rt := rtRoute(t, &routev3.RouteAction{RetryPolicy: p}, false)
	var ep cluster.Endpoint
	for _, e := range cl.Endpoints() {
		if e.Address == bad.addr() {
			ep = e
		}
	}
	for i := range 4 {
		req, _ := http.NewRequest("GET", "http://be.test/", nil)
		x := RoundTrip(req, cl, ep, rt, nil, netip.AddrPort{}, cluster.OriginalSource{})
		if x.Resp == nil || x.Resp.StatusCode != 200 {
			t.Fatalf("request %d: %+v, want 200 from the other endpoint", i, x)
		}
		x.Resp.Body.Close()
		x.Done()
	}
	if bad.attempts() != 4 || good.attempts() != 4 {
		t.Errorf("attempts: %d on the failing endpoint, %d on the other; want 4 and 4", bad.attempts(), good.attempts())
	}
}

// TestRTTakeOverrides: the router's x-envoy-* headers are read and
// removed, the others left; none gives nil.
func TestRTTakeOverrides(t *testing.T) {
	h := http.Header{"X-Short": {"1"}, "X-Envoy-Other-Header": {"2"}, "Content-Type": {"text/plain"}}
	for i := range 20 {
		h.Set("X-Filler-Header-Long-"+strconv.Itoa(i), "v")
	}
	if o := TakeOverrides(h); o != nil || len(h) != 23 {
		t.Fatalf("no router header: %+v, %d headers left; want nil, 23", o, len(h))
	}
	h2 := h.Clone()
	h2.Set("X-Envoy-Retry-On", "5xx") // 16 bytes: the shortest
	h2.Set("X-Envoy-Max-Retries", "3")
	h2.Set("X-Envoy-Upstream-Rq-Timeout-Ms", "250")
	h2["X-Envoy-Upstream-Rq-Per-Try-Timeout-Ms"] = []string{}
	o := TakeOverrides(h2)
	if o == nil || !o.HasMaxRetries || o.MaxRetries != 3 || !o.HasTimeout || o.Timeout != 250*time.Millisecond || o.On == 0 || o.HasPerTryTimeout {
		t.Fatalf("overrides %+v, want retries 3, timeout 250ms, retry-on set, no per-try timeout", o)
	}
	if len(h2) != 23 || h2.Get("X-Short") != "1" || h2.Get("X-Envoy-Other-Header") != "2" {
		t.Errorf("headers left %v, want the 23 others", h2)
	}
	h3 := http.Header{"X-Envoy-Max-Retries": {}}
	if o := TakeOverrides(h3); o == nil || o.HasMaxRetries || len(h3) != 0 {
		t.Errorf("valueless header: %+v, %v left; want empty overrides and no header", o, h3)
	}
}

// TestRTMutate: rewrites and header mutations of the route and target.
func TestRTMutate(t *testing.T) {
	hv := func(k, v string) []*corev3.HeaderValueOption {
		return []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: k, Value: v}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}}
	}
	prefix := func(p string) *routev3.RouteMatch {
		return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: p}}
	}
	cl := &routev3.RouteAction_Cluster{Cluster: "be"}
	rewrite := rtCompile(t, &routev3.Route{Match: prefix("/api/"), RequestHeadersToAdd: hv("x-set", "route"), RequestHeadersToRemove: []string{"x-drop"},
		ResponseHeadersToAdd: hv("x-resp", "r"), ResponseHeadersToRemove: []string{"server"},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: cl, PrefixRewrite: "/v2/",
			HostRewriteSpecifier: &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: "rewritten.example"}}}}, false, "/api/a%2Fb")
	plain := rtCompile(t, &routev3.Route{Match: prefix("/"), Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: cl}}}, false, "/api/x")
	cases := []struct {
		name, path string
		wantPath   string
		wantEsc    string
		wantHost   string
		wantSet    string
		rewrite    bool
	}{
		{name: "encoded", path: "/api/a%2Fb", wantPath: "/v2/a/b", wantEsc: "/v2/a%2Fb", wantHost: "rewritten.example", wantSet: "route", rewrite: true},
		{name: "plain", path: "/api/x", wantPath: "/v2/x", wantEsc: "/v2/x", wantHost: "rewritten.example", wantSet: "route", rewrite: true},
		{name: "no rewrite", path: "/api/a%2Fb", wantPath: "/api/a/b", wantEsc: "/api/a%2Fb", wantHost: "be.test"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := plain
			if tc.rewrite {
				rt = rewrite
			}
			out, err := http.NewRequest("GET", "http://be.test"+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			orig := out.URL
			out.Header.Set("X-Drop", "d")
			out.Header.Set("X-Set", "client")
			MutateRequest(out, rt, rt.Pick())
			if out.URL.Path != tc.wantPath || out.URL.EscapedPath() != tc.wantEsc || out.Host != tc.wantHost {
				t.Errorf("request %s (escaped %s) host %s, want %s (%s) %s", out.URL.Path, out.URL.EscapedPath(), out.Host, tc.wantPath, tc.wantEsc, tc.wantHost)
			}
			if tc.rewrite && (orig == out.URL || orig.EscapedPath() != tc.path) {
				t.Errorf("the rewrite edited the request's URL instead of replacing it")
			}
			wantSet, wantDrop := "client", "d"
			if tc.rewrite {
				wantSet, wantDrop = "route", ""
			}
			if out.Header.Get("X-Set") != wantSet || out.Header.Get("X-Drop") != wantDrop {
				t.Errorf("headers %v, want x-set %q x-drop %q", out.Header, wantSet, wantDrop)
			}
			resp := http.Header{"Server": {"be"}}
			MutateResponse(resp, rt, rt.Pick())
			if tc.rewrite && (resp.Get("X-Resp") != "r" || resp.Get("Server") != "") || !tc.rewrite && (resp.Get("Server") != "be" || len(resp) != 1) {
				t.Errorf("response headers %v", resp)
			}
		})
	}
	h := httpHeaders{"X-A": {"1"}}
	if !h.Has("x-a") || h.Has("x-b") {
		t.Error("httpHeaders.Has ignores the name's case or reports a missing header")
	}
}

// TestRTGRPCRouteTimeout: a gRPC request's timeout on a route with
// max_grpc_timeout.
func TestRTGRPCRouteTimeout(t *testing.T) {
	withMax := func(d *durationpb.Duration) *routev3.RouteAction { return &routev3.RouteAction{MaxGrpcTimeout: d} }
	cases := []struct {
		name    string
		action  *routev3.RouteAction
		ct, hdr string
		want    time.Duration
		ok      bool
	}{
		{"no max", withMax(nil), "application/grpc", "1S", 0, false},
		{"not grpc", withMax(durationpb.New(time.Second)), "application/json", "1S", 0, false},
		{"uncapped, none", withMax(durationpb.New(0)), "application/grpc", "", 0, true},
		{"uncapped", withMax(durationpb.New(0)), "application/grpc", "7S", 7 * time.Second, true},
		{"capped, none", withMax(durationpb.New(time.Second)), "application/grpc", "", time.Second, true},
		{"capped, over", withMax(durationpb.New(time.Second)), "application/grpc", "2S", time.Second, true},
		{"capped, at", withMax(durationpb.New(time.Second)), "application/grpc", "1S", time.Second, true},
		{"capped, under", withMax(durationpb.New(time.Second)), "application/grpc", "300m", 300 * time.Millisecond, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := rtRoute(t, tc.action, false)
			r, _ := http.NewRequest("POST", "http://be.test/", nil)
			r.Header.Set("Content-Type", tc.ct)
			if tc.hdr != "" {
				r.Header.Set("Grpc-Timeout", tc.hdr)
			}
			if d, ok := grpcRouteTimeout(r, rt); d != tc.want || ok != tc.ok {
				t.Errorf("grpcRouteTimeout %v %v, want %v %v", d, ok, tc.want, tc.ok)
			}
		})
	}
	// End to end: the capped grpc-timeout is the route timeout.
	be := rtServe(t, rtStall)
	cl := rtCluster(t, nil, be.addr())
	rt := rtRoute(t, withMax(durationpb.New(150*time.Millisecond)), false)
	req, _ := http.NewRequest("POST", "http://be.test/", nil)
	req.Header.Set("Content-Type", "application/grpc")
	x, _ := rtSend(t, cl, rt, req)
	if x.Fail != FailRouteTimeout || cl.Stats.Router.Timeout.Load() != 1 {
		t.Errorf("stalled gRPC request: %v, %d timeouts; want 504 UT counted", x.Fail, cl.Stats.Router.Timeout.Load())
	}
}

// TestRTErrorKinds: how RoundTrip classifies transport errors.
func TestRTErrorKinds(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("round trip: %w", err) }
	cases := []struct {
		err                        error
		connect, protocol, refused bool
	}{
		{err: wrap(&net.OpError{Op: "dial", Err: errors.New("refused")}), connect: true},
		{err: wrap(&net.OpError{Op: "read", Err: errors.New("reset")})},
		{err: wrap(&cluster.TransportError{Cluster: "be", Err: errors.New("handshake")}), connect: true},
		{err: wrap(http2.ConnectionError(http2.ErrCodeCompression)), protocol: true},
		{err: wrap(http2.ConnectionError(http2.ErrCodeProtocol)), protocol: true},
		{err: wrap(http2.ConnectionError(http2.ErrCodeInternal))},
		{err: wrap(cluster.ErrMalformedResponse), protocol: true},
		{err: wrap(cluster.ErrResponseHeadTooLarge), protocol: true},
		{err: wrap(http2.StreamError{Code: http2.ErrCodeRefusedStream}), refused: true},
		{err: wrap(http2.StreamError{Code: http2.ErrCodeCancel})},
		{err: errors.New("other")},
	}
	for _, tc := range cases {
		if c, p, r := isConnectError(tc.err), isUpstreamProtocolError(tc.err), isRefusedStream(tc.err); c != tc.connect || p != tc.protocol || r != tc.refused {
			t.Errorf("%v: connect %v protocol %v refused %v, want %v %v %v", tc.err, c, p, r, tc.connect, tc.protocol, tc.refused)
		}
	}
}

// TestRTReplayBody: the recorded body replays to the next attempt,
// detaches the previous one, and stops being replayable past its limit.
func TestRTReplayBody(t *testing.T) {
	readAll := func(r io.Reader) (string, error) {
		var sb strings.Builder
		p := make([]byte, 3)
		for range 100 {
			n, err := r.Read(p)
			sb.Write(p[:n])
			if err != nil {
				if errors.Is(err, io.EOF) {
					return sb.String(), nil
				}
				return sb.String(), err
			}
		}
		return sb.String(), errors.New("no progress")
	}
	for _, limit := range []int{7, 6} {
		b := &replayBody{src: io.NopCloser(strings.NewReader("payload")), limit: limit}
		r1 := b.attempt()
		got, err := readAll(r1)
		if got != "payload" || err != nil || b.replayable() != (limit == 7) {
			t.Fatalf("limit %d: first read %q %v, replayable %v", limit, got, err, b.replayable())
		}
		r2 := b.attempt()
		if n, err := r1.Read(make([]byte, 4)); n != 0 || !errors.Is(err, errDetached) {
			t.Errorf("limit %d: detached read %d %v, want errDetached", limit, n, err)
		}
		if err := r1.Close(); err != nil {
			t.Fatal(err)
		}
		got, err = readAll(r2)
		want := "payload"
		if limit == 6 {
			want = "" // nothing recorded: the source is spent
		}
		if got != want || err != nil {
			t.Errorf("limit %d: replay %q %v, want %q", limit, got, err, want)
		}
	}
	// A partial first read: the retry replays it, then reads on.
	b := &replayBody{src: io.NopCloser(strings.NewReader("abcdefgh")), limit: 100}
	r1 := b.attempt()
	if n, err := r1.Read(make([]byte, 3)); n != 3 || err != nil {
		t.Fatalf("first read %d %v", n, err)
	}
	r2 := b.attempt()
	if got, err := readAll(r2); got != "abcdefgh" || err != nil {
		t.Errorf("retry read %q %v, want the whole body", got, err)
	}
	r3 := b.attempt()
	r3.Close()
	if n, err := r3.Read(make([]byte, 3)); n != 0 || !errors.Is(err, errDetached) {
		t.Errorf("closed reader read %d %v, want errDetached", n, err)
	}
}

// TestRTOutlier: a local failure is reported to outlier detection, as a
// 5xx of the endpoint when local-origin errors are not split.
func TestRTOutlier(t *testing.T) {
	be := rtServe(t, rtReset)
	cl := rtCluster(t, func(c *clusterv3.Cluster) {
		c.OutlierDetection = &clusterv3.OutlierDetection{Consecutive_5Xx: wrapperspb.UInt32(2), EnforcingSuccessRate: wrapperspb.UInt32(0)}
	}, be.addr())
	rt := rtRoute(t, nil, false)
	for range 2 {
		req, _ := http.NewRequest("GET", "http://be.test/", nil)
		if x, _ := rtSend(t, cl, rt, req); x.Fail != FailTerminated {
			t.Fatalf("reset: %v, want UC", x.Fail)
		}
	}
	if n := cl.Stats.Counter("outlier_detection.ejections_detected_consecutive_5xx").Load(); n != 1 {
		t.Errorf("consecutive 5xx ejections detected: %d, want 1 after 2 resets", n)
	}
}

// TestRTRepickAllTried: once every endpoint was tried, a retry still
// goes out, to the last of its allowed picks. Round robin alternates
// P0, P1: the first retry goes to P1 (untried), the second's three
// picks end on P0, the third's on P1: two attempts on each.
func TestRTRepickAllTried(t *testing.T) {
	a := rtServe(t, rtStatus(99, 503))
	b := rtServe(t, rtStatus(99, 503))
	cl := rtCluster(t, nil, a.addr(), b.addr())
	p := rtRetryPolicy("5xx", 3)
	p.RetryHostPredicate = []*routev3.RetryPolicy_RetryHostPredicate{{Name: "envoy.retry_host_predicates.previous_hosts"}}
	p.HostSelectionRetryMaxAttempts = 3
	rt := rtRoute(t, &routev3.RouteAction{RetryPolicy: p}, false)
	req, _ := http.NewRequest("GET", "http://be.test/", nil)
	x, body := rtSend(t, cl, rt, req)
	if x.Resp == nil || x.Resp.StatusCode != 503 || !x.LimitExceeded || a.attempts() != 2 || b.attempts() != 2 {
		t.Errorf("exchange %v %q limit %v, attempts %d and %d; want the fourth 503 with URX, 2 attempts on each endpoint", x.Resp, body, x.LimitExceeded, a.attempts(), b.attempts())
	}
}
