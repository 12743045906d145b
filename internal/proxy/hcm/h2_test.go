package hcm

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/grpctest"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// h2Cluster is a static cluster that speaks HTTP/2 upstream, configured
// the way Istio does it (typed_extension_protocol_options).
func h2Cluster(t testing.TB, name string, addrs ...string) *clusterv3.Cluster {
	c := staticCluster(name, addrs...)
	a, err := anypb.New(&upstreamhttp.HttpProtocolOptions{
		UpstreamProtocolOptions: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
					Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
				}}}})
	if err != nil {
		t.Fatal(err)
	}
	c.TypedExtensionProtocolOptions = map[string]*anypb.Any{cluster.HTTPProtocolOptionsKey: a}
	return c
}

func prefixRoute(prefix, clusterName string) *routev3.Route {
	return &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: prefix}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: clusterName}}}}
}

// startH2Proxy runs an HCM built from config (as from LDS) on loopback,
// with the given clusters and routes; mod may change the HCM config.
func startH2Proxy(t testing.TB, codec Codec, routes []*routev3.Route, mod func(*hcmv3.HttpConnectionManager), clusters ...*clusterv3.Cluster) string {
	t.Helper()
	addr, _ := startH2ProxyStats(t, codec, routes, mod, clusters...)
	return addr
}

// startH2ProxyStats is startH2Proxy that also returns the proxy's stats.
func startH2ProxyStats(t testing.TB, codec Codec, routes []*routev3.Route, mod func(*hcmv3.HttpConnectionManager), clusters ...*clusterv3.Cluster) (string, *stats.Store) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	st := stats.New()
	cm := cluster.NewManager(log, st)
	if err := cm.AddStatic(clusters); err != nil {
		t.Fatal(err)
	}
	router, _ := anypb.New(&routerv3.Router{})
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: "test",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: routes}}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: routerFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	}
	if mod != nil {
		mod(h)
	}
	f, err := Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.UseStats(st)
	s := NewServer(Options{Logger: log, Clusters: cm, Codec: codec})
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
	return ln.Addr().String(), st
}

// protoBackend answers "proto=N body=<body>" and a trailer X-Sum with the
// body's digest that it does not announce. h2c makes it also accept
// HTTP/2 with prior knowledge.
func protoBackend(t testing.TB, h2c bool) *httptest.Server {
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(500)
			return
		}
		sum := sha256.Sum256(body)
		w.Header().Set("X-Te", r.Header.Get("Te"))
		fmt.Fprintf(w, "proto=%d body=%s", r.ProtoMajor, body)
		w.(http.Flusher).Flush() // HTTP/1.1: chunked, so that trailers can follow
		w.Header().Set(http.TrailerPrefix+"X-Sum", hex.EncodeToString(sum[:4]))
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

// h2cClient speaks HTTP/2 with prior knowledge over plain TCP.
func h2cClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
}

func TestH2CPriorKnowledge(t *testing.T) {
	h2be := protoBackend(t, true)
	h1be := protoBackend(t, false)
	routes := []*routev3.Route{prefixRoute("/h2/", "h2"), prefixRoute("/h1/", "h1")}
	for _, codec := range codecs {
		t.Run(string(codec), func(t *testing.T) {
			addr := startH2Proxy(t, codec, routes, nil,
				h2Cluster(t, "h2", h2be.Listener.Addr().String()), staticCluster("h1", h1be.Listener.Addr().String()))
			c := h2cClient()
			for _, tc := range []struct {
				path, want string
				trailer    bool // HTTP/1.1 trailers don't cross (forward/trailers.go)
			}{
				{"/h2/x", "proto=2 body=ping", true},
				{"/h1/x", "proto=1 body=ping", false},
			} {
				// A body of unknown length, with TE: trailers as gRPC sends it.
				req, _ := http.NewRequest("POST", "http://"+addr+tc.path, io.NopCloser(strings.NewReader("ping")))
				req.Header.Set("Te", "trailers")
				resp, err := c.Do(req)
				if err != nil {
					t.Fatalf("POST %s: %v", tc.path, err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || string(body) != tc.want || resp.ProtoMajor != 2 {
					t.Fatalf("POST %s = %s %d %q %v; want HTTP/2 200 %q", tc.path, resp.Proto, resp.StatusCode, body, err, tc.want)
				}
				sum := sha256.Sum256([]byte("ping"))
				want := hex.EncodeToString(sum[:4])
				if !tc.trailer {
					want = ""
				}
				if got := resp.Trailer.Get("X-Sum"); got != want {
					t.Errorf("POST %s: trailer X-Sum = %q, want %q (trailers %v)", tc.path, got, want, resp.Trailer)
				}
				if got := resp.Header.Get("X-Te"); got != "trailers" {
					t.Errorf("POST %s: upstream saw TE %q, want trailers", tc.path, got)
				}
			}
			// The same listener still serves HTTP/1.1 (codec_type AUTO).
			resp, err := http.Get("http://" + addr + "/h1/y")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != 1 || string(body) != "proto=1 body=" {
				t.Errorf("HTTP/1.1 GET = %s %q", resp.Proto, body)
			}
			if curl, err := exec.LookPath("curl"); err == nil {
				out, err := exec.Command(curl, "-sS", "--http2-prior-knowledge", "-w", " http=%{http_version}", "http://"+addr+"/h2/c").CombinedOutput()
				if err != nil || string(out) != "proto=2 body= http=2" {
					t.Errorf("curl --http2-prior-knowledge = %q, %v", out, err)
				}
			} else {
				t.Log("curl not found: skipping the curl --http2-prior-knowledge check")
			}
		})
	}
}

// TestCodecTypeHTTP1RefusesH2 checks that codec_type HTTP1 does not sniff:
// the HTTP/2 preface is an HTTP/1.1 request the codec refuses.
func TestCodecTypeHTTP1RefusesH2(t *testing.T) {
	h2be := protoBackend(t, true)
	addr := startH2Proxy(t, CodecStrait, []*routev3.Route{prefixRoute("/", "h2")},
		func(h *hcmv3.HttpConnectionManager) { h.CodecType = hcmv3.HttpConnectionManager_HTTP1 },
		h2Cluster(t, "h2", h2be.Listener.Addr().String()))
	if _, err := h2cClient().Get("http://" + addr + "/"); err == nil {
		t.Fatal("HTTP/2 request to a codec_type HTTP1 listener succeeded")
	}
	// And codec_type HTTP2 serves HTTP/2 without looking.
	addr = startH2Proxy(t, CodecStrait, []*routev3.Route{prefixRoute("/", "h2")},
		func(h *hcmv3.HttpConnectionManager) { h.CodecType = hcmv3.HttpConnectionManager_HTTP2 },
		h2Cluster(t, "h2", h2be.Listener.Addr().String()))
	resp, err := h2cClient().Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("codec_type HTTP2: status %d", resp.StatusCode)
	}
}

func TestBuildHTTP2Options(t *testing.T) {
	router, _ := anypb.New(&routerv3.Router{})
	base := func() *hcmv3.HttpConnectionManager {
		return &hcmv3.HttpConnectionManager{
			RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{}},
			HttpFilters:    []*hcmv3.HttpFilter{{Name: routerFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
		}
	}
	h := base()
	h.Http2ProtocolOptions = &corev3.Http2ProtocolOptions{
		MaxConcurrentStreams:        wrapperspb.UInt32(7),
		InitialStreamWindowSize:     wrapperspb.UInt32(1 << 17),
		InitialConnectionWindowSize: wrapperspb.UInt32(1 << 18),
	}
	f, err := Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.h2.MaxConcurrentStreams != 7 || f.h2.InitialStreamWindowSize != 1<<17 || f.h2.InitialConnectionWindowSize != 1<<18 {
		t.Errorf("HTTP/2 settings = %+v", f.h2)
	}
	h = base()
	h.Http2ProtocolOptions = &corev3.Http2ProtocolOptions{HpackTableSize: wrapperspb.UInt32(0)}
	if _, err := Build(h, nil); err == nil || !strings.Contains(err.Error(), "http2_protocol_options.hpack_table_size") {
		t.Errorf("hpack_table_size: err = %v; want one naming the field", err)
	}
	h = base()
	h.CodecType = hcmv3.HttpConnectionManager_HTTP3
	if _, err := Build(h, nil); err == nil || !strings.Contains(err.Error(), "codec_type") {
		t.Errorf("codec_type HTTP3: err = %v", err)
	}
}

// TestH2MaxConcurrentStreams checks that the HCM's max_concurrent_streams
// reaches the client: with a limit of 1, a second stream waits for the
// first instead of running next to it.
func TestH2MaxConcurrentStreams(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/warm" {
			return
		}
		entered <- struct{}{}
		<-release
	}))
	be.Start()
	t.Cleanup(be.Close)
	addr := startH2Proxy(t, CodecStrait, []*routev3.Route{prefixRoute("/", "be")},
		func(h *hcmv3.HttpConnectionManager) {
			h.Http2ProtocolOptions = &corev3.Http2ProtocolOptions{MaxConcurrentStreams: wrapperspb.UInt32(1)}
		}, staticCluster("be", be.Listener.Addr().String()))
	// One client connection, used directly: the Transport's pool
	// reserves a slot per waiting request, and under
	// StrictMaxConcurrentStreams two reservations on a fresh connection
	// with a limit of 1 deadlock in x/net's client.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := (&http2.Transport{AllowHTTP: true, StrictMaxConcurrentStreams: true}).NewClientConn(nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	get := func(path string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+path, nil)
		resp, err := cc.RoundTrip(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: status %d, flags %q", path, resp.StatusCode, resp.Header.Get("x-envoy-response-flags"))
		}
		return nil
	}
	// A first exchange, so that the client has the proxy's SETTINGS.
	if err := get("/warm"); err != nil {
		t.Fatal(err)
	}
	if n := cc.State().MaxConcurrentStreams; n != 1 {
		t.Fatalf("the client sees max concurrent streams %d; want 1", n)
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- get("/") }()
	}
	select {
	case <-entered:
	case err := <-errs:
		t.Fatalf("a request ended before either reached the backend: %v", err)
	}
	select {
	case <-entered:
		t.Fatal("two streams ran at once with max_concurrent_streams 1")
	case err := <-errs:
		t.Fatalf("the queued request ended while the first was held: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestGRPCThroughHCM(t *testing.T) {
	srv, gaddr := grpctest.Serve(t)
	routes := []*routev3.Route{prefixRoute("/"+grpctest.ServiceName+"/", "grpc"), prefixRoute("/strait.test.Empty/", "empty")}
	for _, codec := range codecs {
		t.Run(string(codec), func(t *testing.T) {
			addr := startH2Proxy(t, codec, routes, nil, h2Cluster(t, "grpc", gaddr), h2Cluster(t, "empty"))
			c := grpctest.Dial(t, addr)
			grpctest.CheckAll(t, c, srv)

			// Local replies in gRPC form: no healthy upstream is
			// UNAVAILABLE, no route UNIMPLEMENTED.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, tc := range []struct {
				method string
				code   codes.Code
				msg    string
			}{
				{"/strait.test.Empty/Echo", codes.Unavailable, forward.BodyNoHealthy},
				{"/strait.test.Nowhere/Echo", codes.Unimplemented, ""},
			} {
				err := c.CC.Invoke(ctx, tc.method, wrapperspb.String("x"), new(wrapperspb.StringValue))
				st, _ := status.FromError(err)
				if st.Code() != tc.code || st.Message() != tc.msg {
					t.Errorf("%s = %v; want %v %q", tc.method, err, tc.code, tc.msg)
				}
			}
		})
	}
}

func TestGRPCLocalReplyForm(t *testing.T) {
	// The raw response: HTTP 200, content-type application/grpc, the
	// status in headers and no body (trailers-only).
	addr := startH2Proxy(t, CodecStrait, []*routev3.Route{prefixRoute("/", "empty")}, nil, h2Cluster(t, "empty"))
	req, _ := http.NewRequest("POST", "http://"+addr+"/svc/M", strings.NewReader("\x00\x00\x00\x00\x00"))
	req.Header.Set("Content-Type", "application/grpc")
	resp, err := h2cClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Grpc-Status") != "14" || resp.Header.Get("Content-Type") != "application/grpc" ||
		resp.Header.Get("Grpc-Message") != forward.BodyNoHealthy || len(body) != 0 {
		t.Errorf("gRPC local reply = %d %v body %q", resp.StatusCode, resp.Header, body)
	}
	// A non-gRPC request gets the plain 503.
	resp, err = h2cClient().Get("http://" + addr + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("plain request: status %d, want 503", resp.StatusCode)
	}
}

func TestGRPCPercentEncode(t *testing.T) {
	if got := grpcPercentEncode("a 100% é\n"); got != "a 100%25 %C3%A9%0A" {
		t.Errorf("grpcPercentEncode = %q", got)
	}
}

// TestH1ClientToH2Upstream: an HTTP/1.1 client through a cluster that
// speaks HTTP/2 upstream (an HTTP2 port, or Istio's h2UpgradePolicy).
func TestH1ClientToH2Upstream(t *testing.T) {
	h2only := httptest.NewUnstartedServer(protoBackend(t, true).Config.Handler)
	h2only.Config.Protocols = new(http.Protocols)
	h2only.Config.Protocols.SetUnencryptedHTTP2(true) // and no HTTP/1.1
	h2only.Start()
	t.Cleanup(h2only.Close)
	for _, codec := range codecs {
		t.Run(string(codec), func(t *testing.T) {
			addr := startH2Proxy(t, codec, []*routev3.Route{prefixRoute("/", "h2")}, nil, h2Cluster(t, "h2", h2only.Listener.Addr().String()))
			tr := &http.Transport{MaxConnsPerHost: 1}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			for i, body := range []io.Reader{strings.NewReader("ping"), io.NopCloser(strings.NewReader("ping")), nil} {
				req, _ := http.NewRequest("POST", "http://"+addr+"/x", body)
				want := "proto=2 body=ping"
				if body == nil {
					want = "proto=2 body="
				}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || string(got) != want || resp.ProtoMajor != 1 {
					t.Fatalf("request %d = %s %d %q %v; want HTTP/1.1 200 %q", i, resp.Proto, resp.StatusCode, got, err, want)
				}
				// An HTTP/1.1 client gets no trailers, as from Envoy with
				// enable_trailers unset (forward/trailers.go).
				if len(resp.Trailer) != 0 {
					t.Errorf("request %d: trailers %v, want none", i, resp.Trailer)
				}
			}
		})
	}
}

// TestGRPCTimeoutHeader: the proxy itself ends a gRPC call whose
// grpc-timeout passes while the upstream has not answered, with
// DEADLINE_EXCEEDED, and cancels the upstream stream.
func TestGRPCTimeoutHeader(t *testing.T) {
	upstreamDone := make(chan struct{})
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers; ends when the proxy resets the stream
		close(upstreamDone)
	}))
	be.Config.Protocols = new(http.Protocols)
	be.Config.Protocols.SetUnencryptedHTTP2(true)
	be.Start()
	t.Cleanup(be.Close)
	addr := startH2Proxy(t, CodecStrait, []*routev3.Route{prefixRoute("/", "be")}, nil, h2Cluster(t, "be", be.Listener.Addr().String()))
	req, _ := http.NewRequest("POST", "http://"+addr+"/svc/M", strings.NewReader("\x00\x00\x00\x00\x00"))
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Grpc-Timeout", "200m")
	resp, err := h2cClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Grpc-Status") != "4" || resp.Header.Get("X-Strait-Response-Flags") != "UT" {
		t.Errorf("gRPC call past its grpc-timeout = %d %v; want 200 with grpc-status 4 and flag UT", resp.StatusCode, resp.Header)
	}
	select {
	case <-upstreamDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream stream was never cancelled")
	}
}

// TestH2AddedHeaders: on the HTTP/2 path every stream's upstream request
// gets its own x-request-id (a UUID4) when the client sent none, and the
// connection's scheme as x-forwarded-proto when the client sent none;
// the client's are kept (Envoy's behaviour without use_remote_address).
// The values live with each stream (streamMem): concurrent streams on one
// connection must not see each other's.
func TestH2AddedHeaders(t *testing.T) {
	beAddr, seen := headerBackend(t)
	addr := startH2Proxy(t, CodecStrait, []*routev3.Route{prefixRoute("/", "be")}, nil, staticCluster("be", beAddr))
	uuid4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	c := h2cClient()
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", "http://"+addr+"/x", nil)
			req.Header.Set("X-N", strconv.Itoa(i))
			if i%2 == 1 {
				req.Header.Set("X-Request-Id", "client-"+strconv.Itoa(i))
				req.Header.Set("X-Forwarded-Proto", "https")
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	wg.Wait()
	ids := map[string]bool{}
	for range n {
		var h http.Header
		select {
		case h = <-seen:
		case <-time.After(10 * time.Second):
			t.Fatal("the backend saw fewer requests than sent")
		}
		i, err := strconv.Atoi(h.Get("X-N"))
		if err != nil {
			t.Fatalf("upstream headers %v", h)
		}
		rid, xfp := h.Values("X-Request-Id"), h.Values("X-Forwarded-Proto")
		if i%2 == 1 {
			if len(rid) != 1 || rid[0] != "client-"+strconv.Itoa(i) || len(xfp) != 1 || xfp[0] != "https" {
				t.Errorf("request %d: x-request-id %q, x-forwarded-proto %q; want the client's", i, rid, xfp)
			}
			continue
		}
		if len(rid) != 1 || !uuid4.MatchString(rid[0]) || len(xfp) != 1 || xfp[0] != "http" {
			t.Errorf("request %d: x-request-id %q, x-forwarded-proto %q; want a UUID4 and http", i, rid, xfp)
		}
		if ids[rid[0]] {
			t.Errorf("request %d: x-request-id %q seen twice", i, rid[0])
		}
		ids[rid[0]] = true
	}
}
