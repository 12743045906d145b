package proxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"golang.org/x/net/http2"

	"github.com/straitmesh/strait/internal/proxy/hcm"
	"github.com/straitmesh/strait/internal/proxy/xdstest"
	"github.com/straitmesh/strait/internal/xdsapi"
)

func tcpProxyListener(t testing.TB, name, addr, clusterName string) *listenerv3.Listener {
	return &listenerv3.Listener{Name: name, Address: socketAddr(addr),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{Name: "envoy.filters.network.tcp_proxy",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: toAny(t, &tcpv3.TcpProxy{StatPrefix: name,
				ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: clusterName}})}}}}}}
}

// TestDrainEndCutsInFlight: once the drain time has passed after LDS
// removed a listener, the connections still open on it are closed, a
// request in flight or not, as Envoy closes them when it removes the
// drained listener: HTTP/1.1, HTTP/2 and tcp_proxy. The
// in-flight request of a listener LDS kept goes on and is answered;
// downstream_cx_destroy counts the closed connections. Close (the end of
// a SIGTERM drain) closes a kept tcp_proxy connection too.
func TestDrainEndCutsInFlight(t *testing.T) {
	for _, codec := range []hcm.Codec{hcm.CodecStrait} {
		t.Run(string(codec), func(t *testing.T) {
			srv := xdstest.Start(t)
			be, release, arrived := slowBackend(t)
			gone, kept, tcpGone, tcpKept := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
			srv.Set(xdsapi.ClusterType, "1", edsCluster("a"), edsCluster("b"))
			srv.Set(xdsapi.EndpointType, "1", cla("a", be.Listener.Addr().String()), cla("b", be.Listener.Addr().String()))
			srv.Set(xdsapi.RouteType, "1", weightedRoute("80", 50, 50))
			srv.Set(xdsapi.ListenerType, "1", httpListener(t, "gone", gone, "80"), httpListener(t, "kept", kept, "80"),
				tcpProxyListener(t, "tcpgone", tcpGone, "a"), tcpProxyListener(t, "tcpkept", tcpKept, "a"))
			p, err := New(Options{Bootstrap: adsBootstrap(srv.Addr), Logger: testLogger(t), AdminAddress: "127.0.0.1:0",
				XDSBackoff: 50 * time.Millisecond, DrainTime: 500 * time.Millisecond, HTTPCodec: codec})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			waitFor(t, 10*time.Second, "ready", p.Ready)

			h1, keptH1 := dialRaw(t, gone), dialRaw(t, kept)
			h1.send(t, "/slow")
			keptH1.send(t, "/slow")
			h2c := &http.Client{Transport: &http2.Transport{AllowHTTP: true,
				DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, network, addr)
				}}}
			h2err := make(chan error, 1)
			go func() {
				resp, err := h2c.Get("http://" + gone + "/slow")
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				h2err <- err
			}()
			tcpConns := map[string]*rawConn{}
			for _, a := range []string{tcpGone, tcpKept} {
				c := dialRaw(t, a)
				c.send(t, "/slow") // through to the backend, which holds it
				tcpConns[a] = c
			}
			for range 5 {
				select {
				case <-arrived:
				case <-time.After(10 * time.Second):
					t.Fatal("the requests did not all reach the backend")
				}
			}

			srv.Set(xdsapi.ListenerType, "2", httpListener(t, "kept", kept, "80"), tcpProxyListener(t, "tcpkept", tcpKept, "a"))
			waitFor(t, 10*time.Second, "LDS version 2", func() bool {
				v, _, _ := p.Listeners.Snapshot()
				return v == "2"
			})
			// The backend still holds every request: only the drain's end
			// can close these.
			if !h1.closedByPeer() {
				t.Error("HTTP/1.1: the connection with a request in flight is still open after the drain time")
			}
			select {
			case err := <-h2err:
				if err == nil {
					t.Error("HTTP/2: the request in flight got a whole response, want it cut")
				}
			case <-time.After(10 * time.Second):
				t.Error("HTTP/2: the request in flight still runs long after the drain time")
			}
			if !tcpConns[tcpGone].closedByPeer() {
				t.Error("tcp_proxy: the removed listener's connection is still open after the drain time")
			}
			hs := p.Stats.HTTP("gone")
			waitFor(t, 10*time.Second, "the removed listener's connections to end", func() bool { return hs.CxActive.Load() == 0 })
			if total, destroyed := hs.CxTotal.Load(), hs.CxDestroy.Load(); destroyed != total || total < 2 {
				t.Errorf("downstream_cx_destroy = %d for %d connections, want every one", destroyed, total)
			}

			close(release)
			if code, body, _ := keptH1.response(t); code != 200 || body != "ok" {
				t.Errorf("kept listener: in-flight response = %d %q, want 200 ok", code, body)
			}
			tk := tcpConns[tcpKept]
			if code, body, _ := tk.response(t); code != 200 || body != "ok" {
				t.Errorf("kept tcp_proxy listener: response = %d %q, want 200 ok", code, body)
			}
			p.Close()
			if !tk.closedByPeer() {
				t.Error("tcp_proxy: a connection is still open after Close")
			}
		})
	}
}
