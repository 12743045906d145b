package e2e

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/straitmesh/strait/internal/localmesh"
	"github.com/straitmesh/strait/internal/proxy/grpctest"
	"github.com/straitmesh/strait/internal/testreq"
)

// grpcServe makes the test binary a gRPC server (the grpcecho pod's app)
// instead of running tests.
var grpcServe = flag.String("grpc-serve", "", "serve the grpctest service on this address instead of running tests")

// serveGRPC runs the grpctest service on addr until SIGTERM or SIGINT.
func serveGRPC(addr string) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	gs := grpc.NewServer()
	grpctest.Register(gs, grpctest.NewServer())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		gs.Stop()
	}()
	if err := gs.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// wsServe makes the test binary a WebSocket echo server (the wsecho pod's
// app) instead of running tests.
var wsServe = flag.String("ws-serve", "", "serve a WebSocket echo on this address instead of running tests")

// serveWebSocket answers every message with "echo: " and the message.
func serveWebSocket(addr string) int {
	h := websocket.Handler(func(ws *websocket.Conn) {
		var msg string
		for websocket.Message.Receive(ws, &msg) == nil {
			if websocket.Message.Send(ws, "echo: "+msg) != nil {
				return
			}
		}
	})
	if err := http.ListenAndServe(addr, h); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestGRPCThroughSidecars runs every kind of gRPC call from a grpc-go
// client in the client pod, through its sidecar and the server pod's
// sidecar, to a grpc-go server; an h2c request with curl
// --http2-prior-knowledge from the client pod; and a WebSocket echo.
func TestGRPCThroughSidecars(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "grpc", localmesh.Options{
		Workloads: []localmesh.Workload{
			{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
			{Name: "grpcecho", Namespace: "demo", ConfigIP: "10.99.0.31", App: []string{self, "-grpc-serve", ":9090"}, AppPort: 9090},
			{Name: "wsecho", Namespace: "demo", ConfigIP: "10.99.0.41", App: []string{self, "-ws-serve", ":8080"}, AppPort: 8080},
		},
	})
	client := m.Pod("client")
	cc, err := grpc.NewClient("passthrough:///240.240.0.30:7070",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return client.DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := grpctest.Client{CC: cc}
	// The server's Canceled channel lives in another process: check the
	// calls from the client's side (CheckAll's server-side checks run in
	// internal/proxy's two-proxy test).
	waitFor(ctx, t, applyTimeout, "the gRPC service never answered through the mesh", func() error {
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := c.Echo(callCtx, "ready", nil, nil)
		return err
	})
	grpctest.CheckAll(t, c, nil)

	t.Run("curl h2c", func(t *testing.T) {
		curl := testreq.Binary(t, "curl", "curl")
		// grpc-go answers a GET without application/grpc with 415: an HTTP/2
		// answer from the server app, through both sidecars.
		cmd := client.Command(ctx, curl, "-sS", "-o", "/dev/null", "--http2-prior-knowledge", "-w", "%{http_version} %{http_code}",
			"http://240.240.0.30:7070/"+grpctest.ServiceName+"/Echo")
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "2 415" {
			t.Errorf("curl --http2-prior-knowledge through the mesh = %q, %v; want \"2 415\"", out, err)
		}
	})
	for _, cl := range []struct {
		pod  *localmesh.Pod
		name string
	}{{client, "outbound|7070||grpcecho.demo.svc.cluster.local"}, {m.Pod("grpcecho"), "inbound|9090||"}} {
		n, err := cl.pod.ClusterRequests(ctx, cl.name)
		if err != nil || n < 7 {
			t.Errorf("%s: cluster %s counted %d requests (%v); want the calls above", cl.pod.Name, cl.name, n, err)
		}
	}

	t.Run("websocket", func(t *testing.T) {
		conn, err := client.DialContext(ctx, "tcp", "240.240.0.40:80")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := websocket.NewConfig("ws://240.240.0.40/ws", "http://240.240.0.40/")
		if err != nil {
			t.Fatal(err)
		}
		ws, err := websocket.NewClient(cfg, conn)
		if err != nil {
			conn.Close()
			t.Fatalf("WebSocket handshake through the mesh: %v", err)
		}
		defer ws.Close()
		for _, msg := range []string{"one", strings.Repeat("x", 64<<10), "three"} {
			if err := websocket.Message.Send(ws, msg); err != nil {
				t.Fatal(err)
			}
			var got string
			if err := websocket.Message.Receive(ws, &got); err != nil || got != "echo: "+msg {
				t.Fatalf("echo of %.10q = %.16q, %v", msg, got, err)
			}
		}
	})
}
