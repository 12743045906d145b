package hcm

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// addrLogFormat prints the connection operators of a request, keyed by
// its x-request-id.
const addrLogFormat = "%REQ(X-REQUEST-ID)% %PROTOCOL% up_local=%UPSTREAM_LOCAL_ADDRESS% up_remote=%UPSTREAM_REMOTE_ADDRESS% " +
	"up_host=%UPSTREAM_HOST% cluster=%UPSTREAM_CLUSTER_RAW% sni=%REQUESTED_SERVER_NAME% peer=%DOWNSTREAM_PEER_URI_SAN% " +
	"tls=%DOWNSTREAM_TLS_VERSION% remote=%DOWNSTREAM_REMOTE_ADDRESS% direct=%DOWNSTREAM_DIRECT_REMOTE_ADDRESS% " +
	"local=%DOWNSTREAM_LOCAL_ADDRESS% direct_local=%DOWNSTREAM_DIRECT_LOCAL_ADDRESS% " +
	"code=%RESPONSE_CODE% flags=%RESPONSE_FLAGS% tfr=%UPSTREAM_TRANSPORT_FAILURE_REASON%\n"

// TestAccessLogConnectionOperators sends requests over real mutual TLS
// to the HCM (as the listener hands it a terminated connection), through
// real upstream connections (HTTP/1.1 and HTTP/2), and checks that the
// address, SNI and TLS operators print what the peers saw: the upstream
// local address is the one the backend saw the request come from.
func TestAccessLogConnectionOperators(t *testing.T) {
	var seen sync.Map // x-request-id -> the backend's view of the proxy's address
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Get("X-Request-Id"), r.RemoteAddr)
		_, _ = io.WriteString(w, "ok") // a handler's write fails only when the client has gone
	}))
	be.Config.Protocols = new(http.Protocols)
	be.Config.Protocols.SetHTTP1(true)
	be.Config.Protocols.SetUnencryptedHTTP2(true)
	be.Start()
	defer be.Close()
	beAddr := be.Listener.Addr().String()

	dir := t.TempDir()
	files := accesslog.NewFiles(accesslog.FilesOptions{FlushInterval: time.Hour})
	defer files.Close()
	fl, err := anypb.New(&filev3.FileAccessLog{Path: filepath.Join(dir, "access.log"), AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
		Format: &corev3.SubstitutionFormatString_TextFormat{TextFormat: addrLogFormat}}}})
	if err != nil {
		t.Fatal(err)
	}
	logs, err := accesslog.Build([]*accesslogv3.AccessLog{{Name: accesslog.FileLoggerName, ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: fl}}}, files)
	if err != nil {
		t.Fatal(err)
	}

	log := slog.New(slog.DiscardHandler)
	cm := cluster.NewManager(log, stats.New())
	// tlsbe speaks TLS to the plaintext backend: its handshakes fail.
	tlsbe := staticCluster("tlsbe", beAddr)
	tlsAny, err := anypb.New(&tlsv3.UpstreamTlsContext{Sni: "be.demo"})
	if err != nil {
		t.Fatal(err)
	}
	tlsbe.TransportSocket = &corev3.TransportSocket{Name: tlsconf.SocketTLS, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: tlsAny}}
	if err := cm.AddStatic([]*clusterv3.Cluster{staticCluster("be", beAddr), h2Cluster(t, "be2", beAddr), tlsbe}); err != nil {
		t.Fatal(err)
	}
	router, _ := anypb.New(&routerv3.Router{})
	f, err := Build(&hcmv3.HttpConnectionManager{
		StatPrefix: "test",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{
				prefixRoute("/nowhere", "missing"), prefixRoute("/h2", "be2"), prefixRoute("/tls", "tlsbe"), prefixRoute("/", "be")}}}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: routerFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.AccessLog = logs

	serverTLS, clientTLS := mutualTLS(t, "spiffe://cluster.local/ns/demo/sa/client")
	clientTLS.ServerName, clientTLS.InsecureSkipVerify = "echo.demo.svc.cluster.local", true
	serverTLS.NextProtos = []string{"h2", "http/1.1"}
	dst := netip.MustParseAddrPort("240.240.0.1:80")
	start := func(codec Codec) string {
		s := NewServer(Options{Logger: log, Clusters: cm, Codec: codec})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					tc := tls.Server(c, serverTLS)
					if err := tc.Handshake(); err != nil {
						c.Close()
						return
					}
					s.ServeConn(tc, f, dst, cluster.OriginalSource{})
				}()
			}
		}()
		t.Cleanup(func() { ln.Close(); s.Close() })
		return ln.Addr().String()
	}
	addrs := map[Codec]string{CodecStrait: start(CodecStrait)}

	lineFor := func(t *testing.T, id string) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			files.Flush()
			data, _ := os.ReadFile(filepath.Join(dir, "access.log"))
			for _, l := range strings.Split(string(data), "\n") {
				if strings.HasPrefix(l, id+" ") {
					return l
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("no access log line for %s", id)
		return ""
	}

	for _, tc := range []struct {
		name  string
		codec Codec
		h2    bool // the client speaks HTTP/2
		path  string
		xff   string
	}{
		{"strait codec, HTTP/1.1 upstream", CodecStrait, false, "/a", ""},
		{"strait codec, HTTP/2 upstream", CodecStrait, false, "/h2", ""},
		{"strait codec, x-forwarded-for", CodecStrait, false, "/a", "10.9.8.7"},
		{"strait codec, unknown cluster", CodecStrait, false, "/nowhere", ""},
		{"HTTP/2 client, HTTP/1.1 upstream", CodecStrait, true, "/a", ""},
		{"HTTP/2 client, HTTP/2 upstream", CodecStrait, true, "/h2", "10.9.8.7, 10.9.8.6"},
		{"strait codec, upstream TLS fails", CodecStrait, false, "/tls", ""},
		{"HTTP/2 client, upstream TLS fails", CodecStrait, true, "/tls", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := strings.NewReplacer(" ", "-", ",", "", "/", "").Replace(tc.name)
			var tr http.RoundTripper = &http.Transport{TLSClientConfig: clientTLS}
			proto := "HTTP/1.1"
			if tc.h2 {
				tr, proto = &http2.Transport{TLSClientConfig: clientTLS}, "HTTP/2"
			}
			defer func() {
				if ci, ok := tr.(interface{ CloseIdleConnections() }); ok {
					ci.CloseIdleConnections()
				}
			}()
			var clientAddr string
			ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
				clientAddr = ci.Conn.LocalAddr().String()
			}})
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addrs[tc.codec]+tc.path, nil)
			req.Header.Set("X-Request-Id", id)
			if tc.xff != "" {
				req.Header.Set("X-Forwarded-For", tc.xff)
			}
			resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
			resp.Body.Close()
			line := lineFor(t, id)

			upLocal, upRemote, upHost, cl := "-", "-", "-", "-"
			code, flags, tfr := "200", "-", "-"
			switch tc.path {
			case "/nowhere":
				code, flags = "503", "NC"
			case "/tls":
				// Go's text where Envoy has BoringSSL's, spaces as '_'.
				upHost, cl, code, flags, tfr = beAddr, "tlsbe", "503", "UF", "tls:_first_record_does_not_look_like_a_TLS_handshake"
			default:
				v, ok := seen.Load(id)
				if !ok {
					t.Fatal("the backend saw no request")
				}
				upLocal, upRemote, upHost, cl = v.(string), beAddr, beAddr, "be"
				if tc.path == "/h2" {
					cl = "be2"
				}
			}
			remote := clientAddr
			if tc.xff != "" {
				parts := strings.Split(tc.xff, ",")
				remote = strings.TrimSpace(parts[len(parts)-1]) + ":0"
			}
			want := fmt.Sprintf("%s %s up_local=%s up_remote=%s up_host=%s cluster=%s sni=echo.demo.svc.cluster.local "+
				"peer=spiffe://cluster.local/ns/demo/sa/client tls=TLSv1.3 remote=%s direct=%s local=240.240.0.1:80 direct_local=%s "+
				"code=%s flags=%s tfr=%s",
				id, proto, upLocal, upRemote, upHost, cl, remote, clientAddr, addrs[tc.codec], code, flags, tfr)
			if line != want {
				t.Errorf("line\n  %s\nwant\n  %s", line, want)
			}
		})
	}
}
