package proxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/straitmesh/strait/internal/proxy/bootstrap"
)

// BenchmarkHTTPProxyStatic measures requests through one proxy hop (static
// bootstrap: listener -> inline route -> STATIC cluster) with keep-alive.
//
//	go test -run '^$' -bench HTTPProxy -cpu 2 ./internal/proxy/
func BenchmarkHTTPProxyStatic(b *testing.B) {
	be := backend(b, "ok")
	ln := freeAddr(b)
	_, bePort, _ := splitHostPort(be.Listener.Addr().String())
	_, lnPort, _ := splitHostPort(ln)
	boot, err := bootstrap.Parse([]byte(fmt.Sprintf(`
static_resources:
  clusters:
  - name: be
    type: STATIC
    load_assignment:
      cluster_name: be
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %s}}}}]}]
  listeners:
  - name: http
    address: {socket_address: {address: 127.0.0.1, port_value: %s}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: http
          route_config:
            virtual_hosts: [{name: all, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: be}}]}]
          http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
`, bePort, lnPort)))
	if err != nil {
		b.Fatal(err)
	}
	p, err := New(Options{Bootstrap: boot, Logger: testLogger(b), AdminAddress: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	url := "http://" + ln + "/"
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Get(url)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}

func splitHostPort(a string) (string, string, error) { return net.SplitHostPort(a) }
