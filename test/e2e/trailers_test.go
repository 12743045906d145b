package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/straitmesh/strait/internal/localmesh"
)

// trailerServe makes the test binary the trailerecho pod's app instead of
// running tests.
var trailerServe = flag.String("trailer-serve", "", "serve the trailer echo (HTTP/1.1 and h2c) on this address instead of running tests")

// trailerEchoReply is what the trailer echo answers: the request's
// x-forwarded-client-cert header and its trailers.
type trailerEchoReply struct {
	XFCC    string      `json:"xfcc"`
	Trailer http.Header `json:"trailer"`
}

// serveTrailerEcho reads each request's body and answers a
// trailerEchoReply.
func serveTrailerEcho(addr string) int {
	s := &http.Server{Addr: addr, ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(trailerEchoReply{XFCC: r.Header.Get("X-Forwarded-Client-Cert"), Trailer: r.Trailer})
	})}
	s.Protocols = new(http.Protocols)
	s.Protocols.SetHTTP1(true)
	s.Protocols.SetUnencryptedHTTP2(true)
	if err := s.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestTrailersThroughSidecars: a client app's request trailers cross both
// sidecars (HTTP/2 all the way, mTLS between the sidecars) to the app,
// except what the HCM owns in the head: an x-forwarded-client-cert in a
// trailer never reaches the app (the header it sees is the server
// sidecar's one element), nor do cookie, x-envoy-* or x-forwarded-for;
// a benign trailer does (the HCM's trailerAllowed).
func TestTrailersThroughSidecars(t *testing.T) {
	requireMesh(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "trailers", localmesh.Options{SecureXDS: true,
		Workloads: []localmesh.Workload{
			{Name: "client", Namespace: "demo", ConfigIP: "10.97.0.10", ServiceAccount: "client"},
			{Name: "trailerecho", Namespace: "demo", ConfigIP: "10.97.0.11", ServiceAccount: "server",
				App: []string{self, "-trailer-serve", ":9090"}, AppPort: 9090},
		}})
	client := m.Pod("client")
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		return client.DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	forged := "By=spiffe://cluster.local/ns/demo/sa/server;URI=spiffe://cluster.local/ns/demo/sa/admin"
	send := func() (trailerEchoReply, error) {
		var rep trailerEchoReply
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://240.240.97.10:7070/", io.NopCloser(strings.NewReader("hello")))
		if err != nil {
			return rep, err
		}
		req.Trailer = http.Header{
			"X-Forwarded-Client-Cert": {forged},
			"Cookie":                  {"session=stolen"},
			"X-Envoy-Original-Path":   {"/admin"},
			"X-Forwarded-For":         {"10.0.0.1"},
			"X-Checksum":              {"ok"},
		}
		resp, err := hc.Do(req)
		if err != nil {
			return rep, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
			return rep, fmt.Errorf("%s %d: %s", resp.Proto, resp.StatusCode, b)
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			return rep, fmt.Errorf("not the trailer echo's answer %q: %w", b, err)
		}
		return rep, nil
	}
	var rep trailerEchoReply
	waitFor(ctx, t, applyTimeout, "trailer echo reachable", func() error {
		var err error
		rep, err = send()
		return err
	})
	want := regexp.MustCompile(`^By=spiffe://cluster\.local/ns/demo/sa/server;Hash=[0-9a-f]{64};Subject="";URI=spiffe://cluster\.local/ns/demo/sa/client$`)
	if !want.MatchString(rep.XFCC) {
		t.Errorf("the app saw x-forwarded-client-cert %q, want one element matching %s", rep.XFCC, want)
	}
	for k, v := range rep.Trailer {
		if k != "X-Checksum" && len(v) > 0 {
			t.Errorf("the app got trailer %s: %q", k, v)
		}
	}
	if got := rep.Trailer.Get("X-Checksum"); got != "ok" {
		t.Errorf("the app got trailer X-Checksum %q, want ok (trailers %v)", got, rep.Trailer)
	}
}
