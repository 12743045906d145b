package hcm

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"golang.org/x/net/websocket"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func withWebSocket(h *hcmv3.HttpConnectionManager) {
	h.UpgradeConfigs = []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket"}}
}

// TestWebSocketEcho: a WebSocket echo through the HCM when upgrade_configs
// allows it, refused (the upgrade stripped) when not.
func TestWebSocketEcho(t *testing.T) {
	be := httptest.NewServer(websocket.Handler(func(ws *websocket.Conn) {
		var msg string
		for websocket.Message.Receive(ws, &msg) == nil {
			if websocket.Message.Send(ws, "echo: "+msg) != nil {
				return
			}
		}
	}))
	t.Cleanup(be.Close)
	routes := []*routev3.Route{prefixRoute("/", "be")}
	dial := func(addr string) (*websocket.Conn, error) {
		return websocket.Dial("ws://"+addr+"/ws", "", "http://"+addr+"/")
	}

	addr := startH2Proxy(t, CodecStrait, routes, withWebSocket, staticCluster("be", be.Listener.Addr().String()))
	ws, err := dial(addr)
	if err != nil {
		t.Fatalf("WebSocket through the proxy: %v", err)
	}
	defer ws.Close()
	for _, m := range []string{"one", strings.Repeat("x", 100<<10), "three"} {
		if err := websocket.Message.Send(ws, m); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := websocket.Message.Receive(ws, &got); err != nil || got != "echo: "+m {
			t.Fatalf("echo of %.10q = %.16q, %v", m, got, err)
		}
	}

	// Not in upgrade_configs (or disabled): Upgrade is hop-by-hop and
	// dropped, so the backend refuses the handshake.
	for name, mod := range map[string]func(*hcmv3.HttpConnectionManager){
		"absent": nil,
		"disabled": func(h *hcmv3.HttpConnectionManager) {
			h.UpgradeConfigs = []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket", Enabled: wrapperspb.Bool(false)}}
		},
	} {
		addr := startH2Proxy(t, CodecStrait, routes, mod, staticCluster("be", be.Listener.Addr().String()))
		if ws, err := dial(addr); err == nil {
			ws.Close()
			t.Errorf("upgrade_configs %s: the WebSocket handshake succeeded", name)
		}
	}
}

// TestUpgradeRefusedByUpstream: an upstream that answers an upgrade
// request with a normal response has it relayed, and the connection
// closes.
func TestUpgradeRefusedByUpstream(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte("no upgrades here"))
	}))
	t.Cleanup(be.Close)
	addr := startH2Proxy(t, CodecStrait, []*routev3.Route{prefixRoute("/", "be")}, withWebSocket, staticCluster("be", be.Listener.Addr().String()))
	req, _ := http.NewRequest("GET", "http://"+addr+"/ws", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !resp.Close {
		t.Errorf("refused upgrade = %d close=%v; want 403 and the connection closed", resp.StatusCode, resp.Close)
	}
}

func TestBuildUpgradeConfigs(t *testing.T) {
	f := &Filter{}
	err := f.buildUpgrades(&hcmv3.HttpConnectionManager{UpgradeConfigs: []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "CONNECT"}}})
	if err == nil || !strings.Contains(err.Error(), "CONNECT") {
		t.Errorf("CONNECT: err = %v", err)
	}
	err = f.buildUpgrades(&hcmv3.HttpConnectionManager{UpgradeConfigs: []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket",
		Filters: []*hcmv3.HttpFilter{{Name: "x"}}}}})
	if err == nil || !strings.Contains(err.Error(), "filters") {
		t.Errorf("filters: err = %v", err)
	}
}
