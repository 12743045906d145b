package hcm

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// upgradeBackend is a raw upstream for upgrade requests: /silent reads
// the request and never answers; anything else gets 101 and then, for
// /push, a byte every 100 ms for two seconds and silence, else an echo.
func upgradeBackend(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				if strings.HasSuffix(req.URL.Path, "/silent") {
					_, _ = io.Copy(io.Discard, c) // until the peer closes; its error is that close
					return
				}
				_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n") // a failed write shows in what the test reads back
				if strings.HasSuffix(req.URL.Path, "/push") {
					for range 20 {
						time.Sleep(100 * time.Millisecond)
						if _, err := c.Write([]byte("p")); err != nil {
							return
						}
					}
					_, _ = io.Copy(io.Discard, c) // until the peer closes; its error is that close
					return
				}
				_, _ = io.Copy(c, c) // echo until the peer closes
			}()
		}
	}()
	return ln.Addr().String()
}

// upgradeExchange sends an upgrade request for path and returns the
// connection and the response head.
func upgradeExchange(t *testing.T, addr, path string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: up\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n") // a failed write shows in what the test reads back
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("upgrade %s: %v", path, err)
	}
	return c, br, resp
}

func TestUpgradeTimeouts(t *testing.T) {
	be := upgradeBackend(t)
	const routeTimeout = 500 * time.Millisecond
	timed := prefixRoute("/timed/", "be")
	timed.GetRoute().Timeout = durationpb.New(routeTimeout)
	timed.GetRoute().IdleTimeout = durationpb.New(5 * time.Second) // the route timeout ends these first
	untimed := prefixRoute("/", "be")
	untimed.GetRoute().Timeout = durationpb.New(0)
	// Ten times /push's gap between bytes: a goroutine of a -race run on
	// a loaded machine can stall for a few hundred ms, which a 300 ms
	// timeout against 100 ms gaps did not survive.
	const idle = time.Second
	addr := startH2Proxy(t, CodecStrait, []*routev3.Route{timed, untimed}, func(h *hcmv3.HttpConnectionManager) {
		withWebSocket(h)
		h.StreamIdleTimeout = durationpb.New(idle)
	}, staticCluster("be", be))

	t.Run("route timeout before 101", func(t *testing.T) {
		start := time.Now()
		_, _, resp := upgradeExchange(t, addr, "/timed/silent")
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusGatewayTimeout || resp.Header.Get("X-Strait-Response-Flags") != "UT" {
			t.Fatalf("got %d %q flags %q; want 504 UT when the upstream never answers the upgrade", resp.StatusCode, body, resp.Header.Get("X-Strait-Response-Flags"))
		}
		if el := time.Since(start); el < routeTimeout {
			t.Fatalf("answered after %v, before the route timeout %v", el, routeTimeout)
		}
	})
	t.Run("stream idle before 101", func(t *testing.T) {
		_, _, resp := upgradeExchange(t, addr, "/silent")
		if resp.StatusCode != http.StatusRequestTimeout || resp.Header.Get("X-Strait-Response-Flags") != "SI" {
			t.Fatalf("got %d flags %q; want 408 SI", resp.StatusCode, resp.Header.Get("X-Strait-Response-Flags"))
		}
	})
	t.Run("route timeout does not end the tunnel", func(t *testing.T) {
		c, br, resp := upgradeExchange(t, addr, "/timed/echo")
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("status %d, want 101", resp.StatusCode)
		}
		// Traffic every 100 ms for three route timeouts: the upgraded
		// stream outlives its route timeout, as in Envoy.
		buf := make([]byte, 1)
		for end := time.Now().Add(3 * routeTimeout); time.Now().Before(end); {
			if _, err := c.Write([]byte("e")); err != nil {
				t.Fatalf("the tunnel ended: %v", err)
			}
			if _, err := io.ReadFull(br, buf); err != nil {
				t.Fatalf("the tunnel ended: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	t.Run("idle counts both directions", func(t *testing.T) {
		_, br, resp := upgradeExchange(t, addr, "/push")
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("status %d, want 101", resp.StatusCode)
		}
		// The client sends nothing; the upstream sends for two seconds,
		// past the 1 s idle timeout, then stops: the tunnel lives while
		// bytes move one way and ends once nothing moves.
		got, err := io.ReadAll(br) // to EOF: the proxy closes the idle tunnel
		if string(got) != strings.Repeat("p", 20) || err != nil {
			t.Fatalf("read %q (%v); want all 20 bytes the upstream sent over two seconds, then the tunnel closed once idle", got, err)
		}
	})
}

func TestH1ToH2RouteTimeout(t *testing.T) {
	hang := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	hang.Config.Protocols = new(http.Protocols)
	hang.Config.Protocols.SetUnencryptedHTTP2(true)
	hang.Start()
	t.Cleanup(hang.Close)
	const routeTimeout = 300 * time.Millisecond
	rt := prefixRoute("/", "h2")
	rt.GetRoute().Timeout = durationpb.New(routeTimeout)
	addr := startH2Proxy(t, CodecStrait, []*routev3.Route{rt}, nil, h2Cluster(t, "h2", hang.Listener.Addr().String()))
	start := time.Now()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout || resp.Header.Get("X-Strait-Response-Flags") != "UT" || string(body) != "upstream request timeout" {
		t.Fatalf("got %d %q flags %q; want 504 \"upstream request timeout\" UT", resp.StatusCode, body, resp.Header.Get("X-Strait-Response-Flags"))
	}
	if el := time.Since(start); el < routeTimeout {
		t.Fatalf("answered after %v, before the route timeout %v", el, routeTimeout)
	}
}
