package cluster

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/testreq"
)

// peerServer answers every HTTP request with the client's IP.
func peerServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		_, _ = io.WriteString(w, host)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// origDstCluster is InboundPassthroughCluster: ORIGINAL_DST with an
// upstream_bind_config source of 127.0.0.6.
func origDstCluster(t *testing.T) *Cluster {
	t.Helper()
	c, err := build(&clusterv3.Cluster{
		Name:                 "InboundPassthroughCluster",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST},
		LbPolicy:             clusterv3.Cluster_CLUSTER_PROVIDED,
		UpstreamBindConfig: &corev3.BindConfig{SourceAddress: &corev3.SocketAddress{
			Address: "127.0.0.6", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 0}}},
	}, stats.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.h1.closeIdle(true); c.close() })
	return c
}

// get sends one request on a pooled connection and returns who the
// upstream saw and whether the connection was reused.
func get(t *testing.T, c *Cluster, ep Endpoint) (string, bool) {
	t.Helper()
	uc, err := c.GetConn(context.Background(), ep)
	if err != nil {
		t.Fatal(err)
	}
	reused := uc.Reused
	uc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(uc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufioReader(uc), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	uc.SetDeadline(time.Time{})
	c.PutConn(uc)
	return string(body), reused
}

func TestOriginalSourceH1Pool(t *testing.T) {
	testreq.Root(t, "IP_TRANSPARENT needs CAP_NET_ADMIN")
	up := peerServer(t)
	c := origDstCluster(t)
	ep, err := c.Pick(netip.MustParseAddrPort(up))
	if err != nil {
		t.Fatal(err)
	}
	a, b := ep, ep
	a.Source = OriginalSource{Addr: netip.MustParseAddr("127.0.0.10"), Mark: 1337}
	b.Source = OriginalSource{Addr: netip.MustParseAddr("127.0.0.11"), Mark: 1337}
	for i, tc := range []struct {
		ep         Endpoint
		want       string
		wantReused bool
	}{
		{ep, "127.0.0.6", false},
		{a, "127.0.0.10", false}, // not the 127.0.0.6 connection
		{b, "127.0.0.11", false}, // not a's connection
		{a, "127.0.0.10", true},
		{b, "127.0.0.11", true},
		{ep, "127.0.0.6", true},
	} {
		got, reused := get(t, c, tc.ep)
		if got != tc.want || reused != tc.wantReused {
			t.Errorf("request %d from %v: upstream saw %s (reused %v), want %s (reused %v)", i, tc.ep.Source, got, reused, tc.want, tc.wantReused)
		}
	}
}

// RoundTrip sends each request from its original source (and pools the
// connections of each source apart, as TestOriginalSourceH1Pool checks).
func TestOriginalSourceRoundTrip(t *testing.T) {
	testreq.Root(t, "IP_TRANSPARENT needs CAP_NET_ADMIN")
	up := peerServer(t)
	c := origDstCluster(t)
	ep, _ := c.Pick(netip.MustParseAddrPort(up))
	for _, src := range []string{"", "127.0.0.10", "127.0.0.11", ""} {
		e := ep
		want := "127.0.0.6"
		if src != "" {
			e.Source = OriginalSource{Addr: netip.MustParseAddr(src), Mark: 1337}
			want = src
		}
		req, _ := http.NewRequest("GET", "http://x/", nil)
		resp, err := c.RoundTrip(req, e)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := strings.TrimSpace(string(body)); got != want {
			t.Errorf("source %q: upstream saw %s, want %s", src, got, want)
		}
	}
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }
