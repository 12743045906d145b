package hcm

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// TestH2CUpgradeServedAsHTTP1: an HTTP/1.1 request asking to upgrade to
// h2c (what curl --http2 sends to an http:// URL) is served as HTTP/1.1,
// as Envoy's HTTP/1 codec does (onHeadersCompleteBase drops Upgrade: h2c,
// its Connection tokens and HTTP2-Settings): no 101, no hang, and neither
// Upgrade nor HTTP2-Settings reaches the upstream, on both codecs, also
// when upgrade_configs allows WebSocket upgrades. Real curl is the client
// where it is installed.
func TestH2CUpgradeServedAsHTTP1(t *testing.T) {
	// The backend answers with the header fields it received, one per line.
	be := newScriptBackend(t, func(b *beReq) bool {
		body, err := b.body()
		if err != nil {
			return false
		}
		var seen strings.Builder
		for _, h := range b.req.Headers {
			fmt.Fprintf(&seen, "%s: %s\n", strings.ToLower(string(h.Name)), h.Value)
		}
		seen.WriteString("body: " + string(body) + "\n")
		b.write(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", seen.Len(), seen.String()))
		return true
	})
	routes := []*routev3.Route{prefixRoute("/", "be")}
	upstreamSawUpgrade := func(body string) bool {
		for _, l := range strings.Split(body, "\n") {
			name, _, _ := strings.Cut(l, ":")
			if name == "upgrade" || name == "http2-settings" || name == "connection" {
				return true
			}
		}
		return false
	}
	for _, codec := range codecs {
		for name, mod := range map[string]func(*hcmv3.HttpConnectionManager){"no upgrade_configs": nil, "websocket allowed": withWebSocket} {
			t.Run(string(codec)+"/"+name, func(t *testing.T) {
				addr := startH2Proxy(t, codec, routes, mod, staticCluster("be", be.addr))
				for _, raw := range []string{
					// curl --http2's request.
					"GET /x HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n",
					// HTTP2-Settings not named by Connection: still not forwarded.
					"POST /y HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\nContent-Length: 5\r\n\r\nhello",
				} {
					resp, body, _, err := exchange(t, addr, raw)
					if err != nil {
						t.Fatalf("%q: %v", raw, err)
					}
					if resp.StatusCode != 200 || resp.ProtoMajor != 1 || resp.ProtoMinor != 1 {
						t.Fatalf("%q: got %s %d, want HTTP/1.1 200", raw, resp.Proto, resp.StatusCode)
					}
					if upstreamSawUpgrade(body) {
						t.Fatalf("%q: the upgrade reached the upstream:\n%s", raw, body)
					}
					if strings.HasPrefix(raw, "POST") && !strings.Contains(body, "body: hello\n") {
						t.Fatalf("%q: the upstream did not get the body:\n%s", raw, body)
					}
				}
				curl, err := exec.LookPath("curl")
				if err != nil {
					t.Log("curl not found: the raw requests above stand for it")
					return
				}
				for _, args := range [][]string{
					{"--http2", "http://" + addr + "/c"},
					{"--http2", "-d", "hello", "http://" + addr + "/c"},
				} {
					cmd := exec.Command(curl, append([]string{"-sS", "--max-time", "10", "-w", "\nhttp=%{http_version} code=%{http_code}"}, args...)...)
					out, err := cmd.CombinedOutput()
					if err != nil {
						t.Fatalf("curl %v: %v\n%s", args, err, out)
					}
					if !strings.HasSuffix(string(out), "http=1.1 code=200") || upstreamSawUpgrade(string(out)) {
						t.Fatalf("curl %v: got\n%s\nwant HTTP/1.1 200 with no upgrade field upstream", args, out)
					}
				}
			})
		}
	}
}

// TestBuildRefusesH2CUpgrade: upgrade_configs naming h2c is refused by
// name (Envoy never performs that upgrade).
func TestBuildRefusesH2CUpgrade(t *testing.T) {
	f := &Filter{}
	err := f.buildUpgrades(&hcmv3.HttpConnectionManager{UpgradeConfigs: []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket"}, {UpgradeType: "H2C"}}})
	if err == nil || !strings.Contains(err.Error(), "upgrade_configs[1]") || !strings.Contains(err.Error(), "h2c") {
		t.Errorf("err = %v, want upgrade_configs[1] h2c refused", err)
	}
}
