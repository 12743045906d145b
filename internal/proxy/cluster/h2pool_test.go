package cluster

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	upstreamhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

func httpOptions(t testing.TB, o *upstreamhttp.HttpProtocolOptions) map[string]*anypb.Any {
	a, err := anypb.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*anypb.Any{HTTPProtocolOptionsKey: a}
}

func explicitH2(o *corev3.Http2ProtocolOptions) *upstreamhttp.HttpProtocolOptions {
	return &upstreamhttp.HttpProtocolOptions{UpstreamProtocolOptions: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_{
		ExplicitHttpConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: o}}}}
}

func originalDstCluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST},
		LbPolicy:             clusterv3.Cluster_CLUSTER_PROVIDED,
		ConnectTimeout:       durationpb.New(time.Second),
	}
}

// h2Backend is an h2c server that counts the connections it accepted.
type h2Backend struct {
	*httptest.Server
	mu    sync.Mutex
	conns int
}

func newH2Backend(t *testing.T, h http.HandlerFunc) *h2Backend {
	b := &h2Backend{}
	b.Server = httptest.NewUnstartedServer(h)
	b.Config.Protocols = new(http.Protocols)
	b.Config.Protocols.SetUnencryptedHTTP2(true)
	b.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			b.mu.Lock()
			b.conns++
			b.mu.Unlock()
		}
	}
	b.Start()
	t.Cleanup(b.Close)
	return b
}

func (b *h2Backend) connCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.conns
}

func h2get(t *testing.T, c *Cluster, ep Endpoint, path string) (string, error) {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://svc"+path, nil)
	resp, err := c.RoundTrip(req, ep)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.ProtoMajor != 2 {
		t.Errorf("%s went upstream as %s", path, resp.Proto)
	}
	return string(b), err
}

// TestH2PoolMultiplexes sends concurrent requests that all wait for each
// other: they must share one connection, or as many as the cluster's
// max_concurrent_streams requires.
func TestH2PoolMultiplexes(t *testing.T) {
	for _, tc := range []struct {
		maxStreams uint32
		wantConns  int
	}{{0, 1}, {5, 4}} {
		const n = 20
		var wg sync.WaitGroup
		wg.Add(n)
		be := newH2Backend(t, func(w http.ResponseWriter, r *http.Request) {
			wg.Done()
			wg.Wait() // every request is in flight at once
			_, _ = io.WriteString(w, "ok")
		})
		cfg := originalDstCluster("h2")
		o := &corev3.Http2ProtocolOptions{}
		if tc.maxStreams > 0 {
			o.MaxConcurrentStreams = wrapperspb.UInt32(tc.maxStreams)
		}
		cfg.TypedExtensionProtocolOptions = httpOptions(t, explicitH2(o))
		c, err := build(cfg, stats.New(), nil)
		if err != nil {
			t.Fatal(err)
		}
		ep := Endpoint{Network: "tcp", Address: be.Listener.Addr().String()}
		errs := make(chan error, n)
		for range n {
			go func() {
				body, err := h2get(t, c, ep, "/")
				if err == nil && body != "ok" {
					err = io.ErrUnexpectedEOF
				}
				errs <- err
			}()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if got := be.connCount(); got != tc.wantConns {
			t.Errorf("max_concurrent_streams %d: %d concurrent requests used %d connections, want %d", tc.maxStreams, n, got, tc.wantConns)
		}
		c.close()
	}
}

// TestH2PoolNewConnAfterGoaway: a server that sends GOAWAY (Go's HTTP/2
// server does on "Connection: close") gets the next request on a new
// connection, and no request fails, also under max_connections 1 (the
// connection that went away frees its slot).
func TestH2PoolNewConnAfterGoaway(t *testing.T) {
	be := newH2Backend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/goaway" {
			w.Header().Set("Connection", "close")
		}
		_, _ = io.WriteString(w, r.RemoteAddr)
	})
	cfg := originalDstCluster("h2")
	cfg.Http2ProtocolOptions = &corev3.Http2ProtocolOptions{} //nolint:staticcheck // the legacy field is what this checks
	// One connection at a time: the connection that went away must give
	// its max_connections slot back for the new one.
	cfg.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxConnections: wrapperspb.UInt32(1)}}}
	c, err := build(cfg, stats.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	ep := Endpoint{Network: "tcp", Address: be.Listener.Addr().String()}
	first, err := h2get(t, c, ep, "/")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := h2get(t, c, ep, "/goaway"); err != nil || again != first {
		t.Fatalf("second request: %q, %v; want it on the first connection %q", again, err, first)
	}
	var after string
	deadline := time.Now().Add(5 * time.Second)
	for {
		after, err = h2get(t, c, ep, "/")
		if err != nil {
			t.Fatalf("request after GOAWAY failed: %v", err)
		}
		if after != first || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // the GOAWAY may still be in flight
	}
	if after == first {
		t.Fatalf("requests after GOAWAY still use the old connection %s", first)
	}
	if got := be.connCount(); got != 2 {
		t.Errorf("connections = %d, want 2", got)
	}
}

func TestHTTPProtocolOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mod     func(c *clusterv3.Cluster)
		want    UpstreamProtocol
		wantErr string
	}{
		{"none", func(c *clusterv3.Cluster) {}, UpstreamHTTP1, ""},
		{"legacy", func(c *clusterv3.Cluster) { c.Http2ProtocolOptions = &corev3.Http2ProtocolOptions{} }, UpstreamHTTP2, ""}, //nolint:staticcheck
		{"explicit h2", func(c *clusterv3.Cluster) {
			c.TypedExtensionProtocolOptions = httpOptions(t, explicitH2(&corev3.Http2ProtocolOptions{MaxConcurrentStreams: wrapperspb.UInt32(10)}))
		}, UpstreamHTTP2, ""},
		{"downstream", func(c *clusterv3.Cluster) {
			c.TypedExtensionProtocolOptions = httpOptions(t, &upstreamhttp.HttpProtocolOptions{
				UpstreamProtocolOptions: &upstreamhttp.HttpProtocolOptions_UseDownstreamProtocolConfig{
					UseDownstreamProtocolConfig: &upstreamhttp.HttpProtocolOptions_UseDownstreamHttpConfig{
						Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}}}})
		}, UpstreamDownstream, ""},
		{"idle timeout", func(c *clusterv3.Cluster) {
			o := explicitH2(&corev3.Http2ProtocolOptions{})
			o.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(time.Minute)}
			c.TypedExtensionProtocolOptions = httpOptions(t, o)
		}, UpstreamHTTP2, ""},
		{"unsupported h2 field", func(c *clusterv3.Cluster) {
			c.TypedExtensionProtocolOptions = httpOptions(t, explicitH2(&corev3.Http2ProtocolOptions{AllowConnect: true}))
		}, 0, "explicit_http_config.http2_protocol_options.allow_connect is not supported"},
		{"unsupported common field", func(c *clusterv3.Cluster) {
			o := explicitH2(&corev3.Http2ProtocolOptions{})
			o.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{MaxStreamDuration: durationpb.New(time.Second)}
			c.TypedExtensionProtocolOptions = httpOptions(t, o)
		}, 0, "common_http_protocol_options.max_stream_duration is not supported"},
		{"connection limits", func(c *clusterv3.Cluster) {
			o := explicitH2(&corev3.Http2ProtocolOptions{})
			o.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{MaxRequestsPerConnection: wrapperspb.UInt32(1),
				MaxConnectionDuration: durationpb.New(time.Minute)}
			c.TypedExtensionProtocolOptions = httpOptions(t, o)
		}, UpstreamHTTP2, ""},
		{"auto config", func(c *clusterv3.Cluster) {
			c.TypedExtensionProtocolOptions = httpOptions(t, &upstreamhttp.HttpProtocolOptions{
				UpstreamProtocolOptions: &upstreamhttp.HttpProtocolOptions_AutoConfig{AutoConfig: &upstreamhttp.HttpProtocolOptions_AutoHttpConfig{}}})
		}, 0, "auto_config is not supported"},
		{"other extension", func(c *clusterv3.Cluster) {
			c.TypedExtensionProtocolOptions = map[string]*anypb.Any{"envoy.filters.network.thrift_proxy": {}}
		}, 0, "thrift_proxy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := proto.Clone(originalDstCluster("c")).(*clusterv3.Cluster)
			tc.mod(cfg)
			c, err := build(cfg, stats.New(), nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v; want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Protocol() != tc.want {
				t.Errorf("protocol = %v, want %v", c.Protocol(), tc.want)
			}
			if c.UpstreamHTTP2(true) != (tc.want != UpstreamHTTP1) || c.UpstreamHTTP2(false) != (tc.want == UpstreamHTTP2) {
				t.Errorf("UpstreamHTTP2 disagrees with %v", tc.want)
			}
		})
	}
}

// max_connections on an HTTP/2 cluster: streams past the cluster's
// max_concurrent_streams share the one connection allowed instead of
// opening another, and a second endpoint, with no connection to share,
// overflows.
func TestH2PoolMaxConnections(t *testing.T) {
	be1 := newH2Backend(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	be2 := newH2Backend(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	cfg := originalDstCluster("h2")
	cfg.TypedExtensionProtocolOptions = httpOptions(t, explicitH2(&corev3.Http2ProtocolOptions{MaxConcurrentStreams: wrapperspb.UInt32(1)}))
	cfg.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxConnections: wrapperspb.UInt32(1)}}}
	c, err := build(cfg, stats.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	ep1 := Endpoint{Network: "tcp", Address: be1.Listener.Addr().String()}
	ep2 := Endpoint{Network: "tcp", Address: be2.Listener.Addr().String()}
	for range 3 {
		if body, err := h2get(t, c, ep1, "/"); err != nil || body != "ok" {
			t.Fatalf("endpoint 1: %q, %v", body, err)
		}
	}
	if _, err := h2get(t, c, ep2, "/"); !errors.Is(err, ErrOverflow) {
		t.Fatalf("endpoint 2 with the one connection taken: %v, want ErrOverflow", err)
	}
	if be1.connCount() != 1 || be2.connCount() != 0 {
		t.Errorf("connections: %d and %d, want 1 and 0", be1.connCount(), be2.connCount())
	}
	if got := c.Stats.Counter("upstream_cx_overflow").Load(); got != 1 {
		t.Errorf("upstream_cx_overflow = %d", got)
	}
}

// max_requests_per_connection and max_connection_duration retire an
// upstream HTTP/2 connection: the next stream goes on a new one.
func TestH2PoolRetiresConnections(t *testing.T) {
	for _, tc := range []struct {
		name      string
		common    *corev3.HttpProtocolOptions
		wantConns int
	}{
		{"max requests 2", &corev3.HttpProtocolOptions{MaxRequestsPerConnection: wrapperspb.UInt32(2)}, 3},
		{"max duration 1ns", &corev3.HttpProtocolOptions{MaxConnectionDuration: durationpb.New(time.Nanosecond)}, 5},
		{"no limit", nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := newH2Backend(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
			cfg := originalDstCluster("h2")
			o := explicitH2(&corev3.Http2ProtocolOptions{})
			o.CommonHttpProtocolOptions = tc.common
			cfg.TypedExtensionProtocolOptions = httpOptions(t, o)
			c, err := build(cfg, stats.New(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.close()
			ep := Endpoint{Network: "tcp", Address: be.Listener.Addr().String()}
			for range 5 {
				if body, err := h2get(t, c, ep, "/"); err != nil || body != "ok" {
					t.Fatalf("%q, %v", body, err)
				}
			}
			if got := be.connCount(); got != tc.wantConns {
				t.Errorf("5 requests used %d connections, want %d", got, tc.wantConns)
			}
		})
	}
}
