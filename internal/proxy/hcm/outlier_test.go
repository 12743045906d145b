package hcm

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestOutlierCountsRetriedFailures: an attempt that failed locally counts
// for outlier detection even when a retry then succeeds, as Envoy's router
// reports every attempt (Filter::onUpstreamReset →
// updateOutlierDetection). With Istio's default retry of connect failures
// and consecutive5xxErrors 1, the host that refuses connections is ejected
// after its first refusal: of twenty requests, all answered, one connect
// fails, on every codec and upstream protocol.
func TestOutlierCountsRetriedFailures(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the request body is not under test
		_, _ = io.WriteString(w, "ok")     // a handler's write fails only when the client has gone
	}))
	t.Cleanup(be.Close)
	h2be := httptest.NewUnstartedServer(be.Config.Handler)
	h2be.Config.Protocols = new(http.Protocols)
	h2be.Config.Protocols.SetUnencryptedHTTP2(true)
	h2be.Start()
	t.Cleanup(h2be.Close)
	// A port nothing listens on: connections to it are refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()

	withOutlier := func(c *clusterv3.Cluster) *clusterv3.Cluster {
		c.LbPolicy = clusterv3.Cluster_ROUND_ROBIN
		c.OutlierDetection = &clusterv3.OutlierDetection{ // Istio's for consecutive5xxErrors 1
			Consecutive_5Xx:                    wrapperspb.UInt32(1),
			EnforcingConsecutive_5Xx:           wrapperspb.UInt32(100),
			ConsecutiveGatewayFailure:          wrapperspb.UInt32(0),
			EnforcingConsecutiveGatewayFailure: wrapperspb.UInt32(0),
			Interval:                           durationpb.New(time.Second),
			BaseEjectionTime:                   durationpb.New(time.Minute),
			MaxEjectionPercent:                 wrapperspb.UInt32(100),
			EnforcingSuccessRate:               wrapperspb.UInt32(0),
		}
		return c
	}
	route := func(cl string) *routev3.Route {
		return &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/" + cl}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cl}, Timeout: durationpb.New(0),
				RetryPolicy: &routev3.RetryPolicy{RetryOn: "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes", NumRetries: wrapperspb.UInt32(2)}}}}
	}
	for _, codec := range codecs {
		for _, up := range []struct {
			name    string
			cluster *clusterv3.Cluster
		}{
			{"h1", withOutlier(staticCluster("h1", dead, be.Listener.Addr().String()))},
			{"h2", withOutlier(h2Cluster(t, "h2", dead, h2be.Listener.Addr().String()))},
		} {
			t.Run(string(codec)+"/"+up.name, func(t *testing.T) {
				addr, st := startH2ProxyStats(t, codec, []*routev3.Route{route(up.name)}, nil, up.cluster)
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
				for i := range 20 {
					resp, err := c.Get("http://" + addr + "/" + up.name)
					if err != nil {
						t.Fatalf("request %d: %v", i, err)
					}
					_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
					resp.Body.Close()
					if resp.StatusCode != 200 {
						t.Fatalf("request %d: status %d, want 200 (a refused connection is retried)", i, resp.StatusCode)
					}
				}
				if n := st.Cluster(up.name).CxConnectFail.Load(); n != 1 {
					t.Errorf("%d connect failures of 20 requests, want 1: the refusing host is ejected after its first", n)
				}
			})
		}
	}
}
