package hcm

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// routerBackend fails the first X-Fail requests of each X-Key with 503,
// delays by X-Delay, and answers what it saw: attempt, method, host, path,
// body and the X-Set / X-Drop headers.
func routerBackend(t *testing.T, h2c bool) *httptest.Server {
	var mu sync.Mutex
	seen := map[string]int{}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen[r.Header.Get("X-Key")]++
		n := seen[r.Header.Get("X-Key")]
		mu.Unlock()
		if d, err := time.ParseDuration(r.Header.Get("X-Delay")); err == nil {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Server", "backend")
		if f, _ := strconv.Atoi(r.Header.Get("X-Fail")); n <= f {
			w.WriteHeader(503)
		}
		if r.Header.Get("X-Len-Only") != "" {
			fmt.Fprintf(w, "attempt=%d len=%d", n, len(body))
			return
		}
		fmt.Fprintf(w, "attempt=%d method=%s host=%s path=%s body=%s x-set=%s x-drop=%s x-envoy-max-retries=%s x-envoy-attempt-count=%s",
			n, r.Method, r.Host, r.URL.RequestURI(), body, r.Header.Get("X-Set"), r.Header.Get("X-Drop"), r.Header.Get("X-Envoy-Max-Retries"), r.Header.Get("X-Envoy-Attempt-Count"))
	}))
	if h2c {
		s.Config.Protocols = new(http.Protocols)
		s.Config.Protocols.SetHTTP1(true)
		s.Config.Protocols.SetUnencryptedHTTP2(true)
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func routerRoutes(clusterName string) []*routev3.Route {
	cl := &routev3.RouteAction_Cluster{Cluster: clusterName}
	prefix := func(p string) *routev3.RouteMatch {
		return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: p}}
	}
	return []*routev3.Route{
		{Match: prefix("/retry"), Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: cl, Timeout: durationpb.New(0),
			RetryPolicy: &routev3.RetryPolicy{RetryOn: "retriable-status-codes", RetriableStatusCodes: []uint32{503}, NumRetries: wrapperspb.UInt32(2)}}}},
		{Match: prefix("/timeout"), Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: cl, Timeout: durationpb.New(200 * time.Millisecond)}}},
		{Match: prefix("/pertry"), Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: cl, Timeout: durationpb.New(0),
			RetryPolicy: &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(1), PerTryTimeout: durationpb.New(200 * time.Millisecond)}}}},
		{Match: prefix("/api/"),
			RequestHeadersToAdd: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-set", Value: "route"},
				AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}},
			RequestHeadersToRemove:  []string{"x-drop"},
			ResponseHeadersToAdd:    []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-resp", Value: "r"}}},
			ResponseHeadersToRemove: []string{"server"},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: cl, PrefixRewrite: "/v2/",
				HostRewriteSpecifier: &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: "rewritten.example"}}}},
		{Match: prefix("/old"), Action: &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{HostRedirect: "new.example",
			PathRewriteSpecifier: &routev3.RedirectAction_PrefixRewrite{PrefixRewrite: "/new"}, ResponseCode: routev3.RedirectAction_FOUND}}},
		{Match: prefix("/"), Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: cl, Timeout: durationpb.New(0)}}},
	}
}

// TestRouterActionsAllPaths runs the route actions on every request path:
// HTTP/1.1 and HTTP/2 clients, both codecs, HTTP/1.1 and HTTP/2 upstreams.
func TestRouterActionsAllPaths(t *testing.T) {
	type upstream struct {
		name string
		mk   func(t *testing.T, addr string) *clusterv3.Cluster
	}
	ups := []upstream{
		{"h1up", func(t *testing.T, addr string) *clusterv3.Cluster { return staticCluster("be", addr) }},
		{"h2up", func(t *testing.T, addr string) *clusterv3.Cluster { return h2Cluster(t, "be", addr) }},
	}
	for _, codec := range codecs {
		for _, up := range ups {
			for _, down := range []string{"h1", "h2c"} {
				t.Run(fmt.Sprintf("%s/%s/%s", codec, down, up.name), func(t *testing.T) {
					be := routerBackend(t, true)
					countAttempts := func(h *hcmv3.HttpConnectionManager) {
						h.GetRouteConfig().VirtualHosts[0].IncludeRequestAttemptCount = true
					}
					addr, st := startH2ProxyStats(t, codec, routerRoutes("be"), countAttempts, up.mk(t, be.Listener.Addr().String()))
					rs := &st.Cluster("be").Router
					c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
					if down == "h2c" {
						c = h2cClient()
					}
					c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
					do := func(method, path, body string, h map[string]string) (*http.Response, string) {
						t.Helper()
						req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
						for k, v := range h {
							req.Header.Set(k, v)
						}
						resp, err := c.Do(req)
						if err != nil {
							t.Fatalf("%s %s: %v", method, path, err)
						}
						defer resp.Body.Close()
						b, _ := io.ReadAll(resp.Body)
						return resp, string(b)
					}
					key := t.Name()

					resp, body := do("POST", "/retry", "payload", map[string]string{"X-Key": key + "a", "X-Fail": "2", "X-Envoy-Attempt-Count": "9"})
					if resp.StatusCode != 200 || !strings.Contains(body, "attempt=3") || !strings.Contains(body, "body=payload ") ||
						!strings.HasSuffix(body, "x-envoy-attempt-count=3") {
						t.Errorf("retried POST: %d %q, want 200 on attempt 3 (x-envoy-attempt-count 3) with the whole body", resp.StatusCode, body)
					}
					resp, body = do("POST", "/retry", "payload", map[string]string{"X-Key": key + "b", "X-Fail": "5"})
					if resp.StatusCode != 503 || !strings.Contains(body, "attempt=3") || resp.Header.Get("X-Strait-Response-Flags") != "URX" {
						t.Errorf("exhausted: %d %q flags %q, want the third 503 with URX", resp.StatusCode, body, resp.Header.Get("X-Strait-Response-Flags"))
					}
					big := strings.Repeat("b", 300<<10)
					resp, body = do("POST", "/retry", big, map[string]string{"X-Key": key + "big", "X-Fail": "1", "X-Len-Only": "1"})
					if resp.StatusCode != 200 || body != "attempt=2 len=307200" {
						t.Errorf("retried 300 KiB POST: %d %q, want 200 on attempt 2 with the whole body", resp.StatusCode, body)
					}
					huge := strings.Repeat("h", 2<<20)
					resp, body = do("POST", "/retry", huge, map[string]string{"X-Key": key + "huge", "X-Fail": "1", "X-Len-Only": "1"})
					if resp.StatusCode != 503 || body != "attempt=1 len=2097152" {
						t.Errorf("2 MiB POST: %d %q, want the first 503: a body over the buffer limit is not replayed", resp.StatusCode, body)
					}
					rs.Retry.Add(^uint64(0)) // the 300 KiB retry
					if r, s, l := rs.Retry.Load(), rs.RetrySuccess.Load(), rs.RetryLimitExceeded.Load(); r != 4 || s != 2 || l != 1 {
						t.Errorf("stats: retry %d success %d limit exceeded %d, want 4, 2, 1", r, s, l)
					}
					resp, body = do("GET", "/retry", "", map[string]string{"X-Key": key + "c", "X-Fail": "1", "X-Envoy-Max-Retries": "0"})
					if resp.StatusCode != 503 || !strings.Contains(body, "x-envoy-max-retries= ") && !strings.HasSuffix(body, "x-envoy-max-retries=") {
						t.Errorf("x-envoy-max-retries 0: %d %q, want the first 503 and the header not forwarded", resp.StatusCode, body)
					}
					resp, body = do("GET", "/plain", "", map[string]string{"X-Key": key + "d", "X-Fail": "1"})
					if resp.StatusCode != 503 {
						t.Errorf("no retry policy: %d %q, want the 503", resp.StatusCode, body)
					}

					// The backend answers 200 after its delay: a 504 with the
					// UT flag is the route's timeout (no upper bound on time,
					// which a loaded -race run does not keep).
					resp, _ = do("GET", "/timeout", "", map[string]string{"X-Delay": "3s"})
					if resp.StatusCode != 504 || resp.Header.Get("X-Strait-Response-Flags") != "UT" {
						t.Errorf("route timeout: %d flags %q, want 504 UT before the 3s delay", resp.StatusCode, resp.Header.Get("X-Strait-Response-Flags"))
					}
					resp, _ = do("GET", "/plain", "", map[string]string{"X-Delay": "3s", "X-Envoy-Upstream-Rq-Timeout-Ms": "200"})
					if resp.StatusCode != 504 {
						t.Errorf("x-envoy-upstream-rq-timeout-ms: %d, want 504", resp.StatusCode)
					}
					resp, _ = do("GET", "/pertry", "", map[string]string{"X-Key": key + "e", "X-Delay": "3s"})
					if resp.StatusCode != 504 || resp.Header.Get("X-Strait-Response-Flags") != "UT,URX" {
						t.Errorf("per-try timeout twice: %d flags %q, want 504 UT,URX", resp.StatusCode, resp.Header.Get("X-Strait-Response-Flags"))
					}
					if to, pt := rs.Timeout.Load(), rs.PerTryTimeout.Load(); to != 2 || pt != 2 {
						t.Errorf("stats: timeouts %d per-try %d, want 2 and 2", to, pt)
					}

					resp, body = do("GET", "/api/items?id=7", "", map[string]string{"X-Set": "client", "X-Drop": "x"})
					if resp.StatusCode != 200 || !strings.Contains(body, "host=rewritten.example path=/v2/items?id=7") ||
						!strings.Contains(body, "x-set=route x-drop= ") || resp.Header.Get("X-Resp") != "r" || resp.Header.Get("Server") != "" {
						t.Errorf("rewrite and headers: %d %q x-resp %q server %q", resp.StatusCode, body, resp.Header.Get("X-Resp"), resp.Header.Get("Server"))
					}
					resp, _ = do("GET", "/old/a?b=1", "", nil)
					if resp.StatusCode != 302 || resp.Header.Get("Location") != "http://new.example/new/a?b=1" {
						t.Errorf("redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
					}
				})
			}
		}
	}
}

// TestGRPCRetryOnStatus: a gRPC call answered UNAVAILABLE in trailers-only
// form is retried under retry_on "unavailable" (Istio's default policy),
// and one answered INTERNAL is not.
func TestGRPCRetryOnStatus(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the request body is not under test
		mu.Lock()
		seen[r.Header.Get("X-Key")]++
		n := seen[r.Header.Get("X-Key")]
		mu.Unlock()
		w.Header().Set("Content-Type", "application/grpc")
		if f, _ := strconv.Atoi(r.Header.Get("X-Fail")); n <= f {
			w.Header().Set("Grpc-Status", r.Header.Get("X-Grpc-Status"))
			w.WriteHeader(200)
			return
		}
		w.Header().Set("Trailer", "Grpc-Status")
		w.WriteHeader(200)
		w.Write([]byte{0, 0, 0, 0, 0})
		w.Header().Set("Grpc-Status", "0")
		w.Header().Set(http.TrailerPrefix+"X-Attempt", strconv.Itoa(n))
	}))
	be.Config.Protocols = new(http.Protocols)
	be.Config.Protocols.SetUnencryptedHTTP2(true)
	be.Start()
	t.Cleanup(be.Close)
	routes := []*routev3.Route{{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "be"}, Timeout: durationpb.New(0),
			RetryPolicy: &routev3.RetryPolicy{RetryOn: "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes", NumRetries: wrapperspb.UInt32(2)}}}}}
	for _, codec := range codecs {
		t.Run(string(codec), func(t *testing.T) {
			addr := startH2Proxy(t, codec, routes, nil, h2Cluster(t, "be", be.Listener.Addr().String()))
			c := h2cClient()
			call := func(key, status string) (*http.Response, string) {
				req, _ := http.NewRequest("POST", "http://"+addr+"/pkg.Svc/M", strings.NewReader("\x00\x00\x00\x00\x00"))
				req.Header.Set("Content-Type", "application/grpc")
				req.Header.Set("Te", "trailers")
				req.Header.Set("X-Key", key)
				req.Header.Set("X-Fail", "1")
				req.Header.Set("X-Grpc-Status", status)
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
				resp.Body.Close()
				st := resp.Header.Get("Grpc-Status")
				if st == "" {
					st = resp.Trailer.Get("Grpc-Status")
				}
				return resp, st
			}
			if resp, st := call(t.Name()+"unavailable", "14"); st != "0" || resp.Trailer.Get("X-Attempt") != "2" {
				t.Errorf("UNAVAILABLE once: grpc-status %q attempt %q, want 0 on attempt 2", st, resp.Trailer.Get("X-Attempt"))
			}
			if _, st := call(t.Name()+"internal", "13"); st != "13" {
				t.Errorf("INTERNAL: grpc-status %q, want 13 (not retried)", st)
			}
		})
	}
}

// TestMutationsDoNotLeak: a keep-alive connection's next request carries
// none of the previous request's header mutations, whatever answers it.
func TestMutationsDoNotLeak(t *testing.T) {
	be := routerBackend(t, false)
	routes := []*routev3.Route{
		{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/hdr"}},
			RequestHeadersToAdd:  []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-set", Value: "leak"}}},
			ResponseHeadersToAdd: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-resp", Value: "leak"}}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "be"},
				HostRewriteSpecifier: &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: "leak.example"}, PrefixRewrite: "/leaked"}}},
		{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/plain"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "be"}}}},
	}
	for _, codec := range codecs {
		t.Run(string(codec), func(t *testing.T) {
			addr := startH2Proxy(t, codec, routes, nil, staticCluster("be", be.Listener.Addr().String()))
			tr := &http.Transport{MaxConnsPerHost: 1}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			for _, path := range []string{"/hdr", "/none", "/hdr", "/plain"} {
				resp, err := c.Get("http://" + addr + path)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if path == "/hdr" {
					if resp.Header.Get("X-Resp") != "leak" || !strings.Contains(string(body), "host=leak.example path=/leaked") {
						t.Errorf("%s: x-resp %q body %q, want the route's mutations", path, resp.Header.Get("X-Resp"), body)
					}
					continue
				}
				if resp.Header.Get("X-Resp") != "" || strings.Contains(string(body), "leak") {
					t.Errorf("%s after /hdr: status %d x-resp %q body %q: the previous request's mutations leaked", path, resp.StatusCode, resp.Header.Get("X-Resp"), body)
				}
			}
		})
	}
}

// TestRetryCircuitBreaker: a cluster's max_retries bounds the retries in
// flight. With max_retries 0 a retriable 503 is answered as it came, after
// one attempt, and upstream_rq_retry_overflow counts the refused retry; on
// every codec and downstream protocol.
func TestRetryCircuitBreaker(t *testing.T) {
	for _, codec := range codecs {
		for _, down := range []string{"h1", "h2c"} {
			t.Run(fmt.Sprintf("%s/%s", codec, down), func(t *testing.T) {
				be := routerBackend(t, true)
				cl := staticCluster("be", be.Listener.Addr().String())
				cl.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxRetries: wrapperspb.UInt32(0)}}}
				addr, st := startH2ProxyStats(t, codec, routerRoutes("be"), nil, cl)
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
				if down == "h2c" {
					c = h2cClient()
				}
				req, _ := http.NewRequest("POST", "http://"+addr+"/retry", strings.NewReader("payload"))
				req.Header.Set("X-Key", t.Name())
				req.Header.Set("X-Fail", "2")
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 503 || !strings.Contains(string(body), "attempt=1 ") {
					t.Errorf("%d %q, want the first 503, not retried", resp.StatusCode, body)
				}
				if got := st.Cluster("be").Counter("upstream_rq_retry_overflow").Load(); got != 1 {
					t.Errorf("upstream_rq_retry_overflow = %d, want 1", got)
				}
			})
		}
	}
}

// TestRetryKeepsConnections: a request retried on its upstream's status
// stays on its keep-alive downstream connection, and, as in Envoy's
// router (Filter::onUpstreamHeaders resets the attempt unless its
// response ended with its head), the retried attempt's upstream
// connection goes back to the pool when its response had no body, and is
// closed when it had one or when bytes follow it (which must then never
// reach a client). A raw backend: the first attempt of each key answers
// 503 in the way X-Mode asks, later ones 200 "ok".
func TestRetryKeepsConnections(t *testing.T) {
	for _, codec := range codecs {
		t.Run(string(codec), func(t *testing.T) {
			be, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { be.Close() })
			var conns atomic.Int32
			var mu sync.Mutex
			seen := map[string]int{}
			go func() {
				for {
					c, err := be.Accept()
					if err != nil {
						return
					}
					conns.Add(1)
					go func() {
						defer c.Close()
						br := bufio.NewReader(c)
						for {
							req, err := http.ReadRequest(br)
							if err != nil {
								return
							}
							_, _ = io.Copy(io.Discard, req.Body) // the request body is not under test
							mu.Lock()
							seen[req.Header.Get("X-Key")]++
							n := seen[req.Header.Get("X-Key")]
							mu.Unlock()
							out := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
							if n == 1 {
								switch req.Header.Get("X-Mode") {
								case "nobody":
									out = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
								case "body":
									out = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy"
								case "stray":
									out = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n" +
										"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nsmuggle"
								}
							}
							if _, err := io.WriteString(c, out); err != nil {
								return
							}
						}
					}()
				}
			}()
			addr, st := startH2ProxyStats(t, codec, routerRoutes("be"), nil, staticCluster("be", be.Addr().String()))
			down, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer down.Close()
			br := bufio.NewReader(down)
			for i, tc := range []struct {
				mode     string
				newConns int32 // upstream connections the exchange opens
			}{
				{"nobody", 1}, // one for both attempts: the first is reused
				{"nobody", 0}, // the pooled one serves both attempts
				{"body", 1},   // the 503's connection is closed; the retry dials
				{"stray", 1},  // bytes after the 503: its connection is not reused
				{"nobody", 0},
			} {
				before := conns.Load()
				fmt.Fprintf(down, "POST /retry HTTP/1.1\r\nHost: x\r\nX-Key: %s-%d\r\nX-Mode: %s\r\nContent-Length: 4\r\n\r\ndata", t.Name(), i, tc.mode)
				down.SetReadDeadline(time.Now().Add(10 * time.Second))
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("%d %s: the downstream connection did not carry the request: %v", i, tc.mode, err)
				}
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 || string(body) != "ok" || resp.Close {
					t.Fatalf("%d %s: %d %q close=%v, want 200 \"ok\" on a kept connection", i, tc.mode, resp.StatusCode, body, resp.Close)
				}
				if got := conns.Load() - before; got != tc.newConns {
					t.Errorf("%d %s: %d new upstream connections, want %d", i, tc.mode, got, tc.newConns)
				}
			}
			if got := st.Cluster("be").Router.Retry.Load(); got != 5 {
				t.Errorf("upstream_rq_retry = %d, want 5", got)
			}
			mu.Lock()
			defer mu.Unlock()
			for k, n := range seen {
				if n != 2 {
					t.Errorf("key %s reached the backend %d times, want 2 (one retry)", k, n)
				}
			}
		})
	}
}
