package meshview

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/debugapi"
)

// proxiesFunc adapts a function to ProxySource.
type proxiesFunc func() []debugapi.ConnectionStatus

func (f proxiesFunc) Connections() []debugapi.ConnectionStatus { return f() }

var _ ProxySource = proxiesFunc(nil)

// fakeProxy serves /stats/prometheus on ip:port with a request counter the
// test sets, counting its scrapes.
type fakeProxy struct {
	requests, errors atomic.Int64
	scrapes          atomic.Int64
}

func (p *fakeProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/stats/prometheus" {
		http.NotFound(w, r)
		return
	}
	p.scrapes.Add(1)
	fmt.Fprintf(w, "# TYPE istio_requests_total counter\nenvoy_server_live 1\n%s%s",
		reqs("destination", "client", "server", "200", float64(p.requests.Load())),
		reqs("destination", "client", "server", "503", float64(p.errors.Load())))
}

// listenSamePort listens on 127.0.0.1 and 127.0.0.2 with one port (the
// scraper uses one port for every proxy).
func listenSamePort(t *testing.T) (net.Listener, net.Listener, int) {
	t.Helper()
	for range 20 {
		a, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := a.Addr().(*net.TCPAddr).Port
		b, err := net.Listen("tcp", "127.0.0.2:"+strconv.Itoa(port))
		if err == nil {
			return a, b, port
		}
		_ = a.Close()
	}
	t.Fatal("no port free on both 127.0.0.1 and 127.0.0.2")
	return nil, nil, 0
}

// TestScraperAndPage: real scrapes of two proxies on loopback (one whose
// counters move, one that answers with none) and one connected proxy that
// refuses connections; the page shows the edge's figures, each proxy's
// sync state and the failed scrape. Nothing is scraped before the page is
// first viewed, nor once it has not been viewed for IdleAfter.
func TestScraperAndPage(t *testing.T) {
	la, lb, port := listenSamePort(t)
	server, other := &fakeProxy{}, &fakeProxy{}
	for _, s := range []*httptest.Server{{Listener: la, Config: &http.Server{Handler: server}}, {Listener: lb, Config: &http.Server{Handler: other}}} {
		s.Start()
		t.Cleanup(s.Close)
	}
	const cds = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	const lds = "type.googleapis.com/envoy.config.listener.v3.Listener"
	cons := []debugapi.ConnectionStatus{
		{ProxyID: "sidecar~127.0.0.1~server-1.demo~demo.svc.cluster.local", IP: "127.0.0.1", Watched: []debugapi.WatchedStatus{
			{TypeURL: cds, VersionSent: "v2", NonceSent: "n2", VersionAcked: "v2", NonceAcked: "n2"},
			{TypeURL: lds, VersionSent: "v3", NonceSent: "n3", VersionAcked: "v2", NonceAcked: "n2", NackError: "bad listener", NonceNacked: "n3"},
		}},
		{ProxyID: "sidecar~127.0.0.2~client-1.demo~demo.svc.cluster.local", IP: "127.0.0.2", Watched: []debugapi.WatchedStatus{
			{TypeURL: cds, VersionSent: "v2", NonceSent: "n2", VersionAcked: "v1", NonceAcked: "n1"},
		}},
		// The agent's name-table stream: same node, one row.
		{ProxyID: "sidecar~127.0.0.2~client-1.demo~demo.svc.cluster.local", IP: "127.0.0.2", Watched: []debugapi.WatchedStatus{
			{TypeURL: "type.googleapis.com/istio.networking.nds.v1.NameTable", VersionSent: "1", NonceSent: "a", VersionAcked: "1", NonceAcked: "a"},
		}},
		{ProxyID: "sidecar~127.0.0.3~gone-1.demo~demo.svc.cluster.local", IP: "127.0.0.3"},
	}
	s, err := NewScraper(Options{
		Proxies: proxiesFunc(func() []debugapi.ConnectionStatus { return cons }),
		Port:    port, Interval: 20 * time.Millisecond, Window: time.Minute, IdleAfter: 2 * time.Second, Timeout: time.Second, Concurrency: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	defer wg.Wait()
	defer cancel()

	// No view, no scrape.
	time.Sleep(100 * time.Millisecond) // proving an absence: nothing to wait for
	if n := server.scrapes.Load(); n != 0 {
		t.Fatalf("%d scrapes before the page was viewed", n)
	}
	page := httptest.NewServer(s.Handler())
	defer page.Close()
	get := func() string {
		resp, err := http.Get(page.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("page: %s %s", resp.Status, body)
		}
		return string(body)
	}
	waitUntil := func(what string, cond func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			body := get()
			if cond(body) {
				return body
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s; page:\n%s", what, body)
			}
			time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
		}
	}
	waitUntil("no first scrape", func(string) bool { return server.scrapes.Load() > 0 && other.scrapes.Load() > 0 })
	server.requests.Store(30)
	server.errors.Store(10)
	body := waitUntil("no edge with 40 requests", func(b string) bool {
		return strings.Contains(b, `<td class="n requests">40</td>`)
	})
	for _, want := range []string{
		`data-source="demo/client" data-destination="demo/server"`,
		`<td class="n errors">10</td>`,
		`>75.0%</td>`,
		`<td class="n p99">-</td>`,
		`<line x1="324" y1="280" x2="634" y2="280" stroke="#d62728"`, // client left, server right
		// Sync state, one row per node id.
		`<td class="SYNCED" title="sent v2 (nonce n2), acked v2 (nonce n2)">SYNCED`,
		`<td class="NACK" title="sent v3 (nonce n3), acked v2 (nonce n2); NACK: bad listener">NACK`,
		`<td class="STALE" title="sent v2 (nonce n2), acked v1 (nonce n1)">STALE`,
		`<td>NameTable</td>`,
		// The proxy that is not there.
		`<span class="err">scrape http://127.0.0.3:` + strconv.Itoa(port) + `/stats/prometheus:`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if n := strings.Count(body, `<tr class="proxy"`); n != 3 {
		t.Errorf("%d proxy rows, want 3", n)
	}

	// Unviewed for IdleAfter, the scrapes stop.
	deadline := time.Now().Add(10 * time.Second)
	for {
		before := server.scrapes.Load()
		time.Sleep(300 * time.Millisecond) // watching a counter stand still
		if server.scrapes.Load() == before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still scraping 10s after the last view (IdleAfter 2s)")
		}
	}
}
