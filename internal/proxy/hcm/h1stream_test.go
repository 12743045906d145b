package hcm

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/straitmesh/strait/internal/proxy/filters/http/registry"
	routerfilter "github.com/straitmesh/strait/internal/proxy/filters/http/router"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// TestH1StreamInfoUpstreamHostPerRequest: the HTTP/1.1 stream keeps the
// last upstream address it parsed, and each request's StreamInfo still
// names the endpoint that served that request: on one connection whose
// requests the round robin sends to two backends in turn, with a
// request that reaches no upstream (no route) between them.
func TestH1StreamInfoUpstreamHostPerRequest(t *testing.T) {
	var mu sync.Mutex
	var infos []httpfilter.StreamInfo
	reg, err := registry.New(infoFactory{&mu, &infos}, routerfilter.Factory{})
	if err != nil {
		t.Fatal(err)
	}
	var bes []string
	for range 2 {
		be := httptest.NewUnstartedServer(nil)
		addr := be.Listener.Addr().String()
		be.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, addr) // a handler's write fails only when the client has gone
		})
		be.Start()
		t.Cleanup(be.Close)
		bes = append(bes, addr)
	}
	addr := startChainProxy(t, CodecStrait, reg, []string{"test.info"},
		[]*routev3.Route{prefixRoute("/p", "be")}, staticCluster("be", bes...))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	// want is, per request, the upstream it reached ("" for none).
	var want []string
	for _, path := range []string{"/p", "/p", "/none", "/p", "/p", "/p"} {
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: t\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case path == "/none" && resp.StatusCode == http.StatusNotFound:
			want = append(want, "")
		case resp.StatusCode == http.StatusOK:
			want = append(want, string(body))
		default:
			t.Fatalf("%s: %d %q", path, resp.StatusCode, body)
		}
		// Complete runs once the response is out: wait for it, so that
		// the infos are in request order.
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			n := len(infos)
			mu.Unlock()
			if n == len(want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d Completes after %d requests", n, len(want))
			}
			time.Sleep(time.Millisecond)
		}
	}
	if want[0] == want[1] {
		t.Fatalf("the round robin sent both first requests to %s: the test needs two endpoints in turn", want[0])
	}
	mu.Lock()
	defer mu.Unlock()
	for i, in := range infos {
		if w := want[i]; w == "" {
			if in.UpstreamHost.IsValid() {
				t.Errorf("request %d reached no upstream; StreamInfo.UpstreamHost %v", i, in.UpstreamHost)
			}
		} else if in.UpstreamHost != netip.MustParseAddrPort(w) {
			t.Errorf("request %d: StreamInfo.UpstreamHost %v, served by %s", i, in.UpstreamHost, w)
		}
	}
}
