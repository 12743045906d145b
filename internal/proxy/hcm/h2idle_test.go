package hcm

import (
	"io"
	"net"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestH2IdleConnectionMemory opens HTTP/2 connections that each carry
// one request and then stay idle, and bounds what the proxy holds for
// each: one goroutine (the reader; the writer runs only while bytes are
// queued) and what its Go heap and goroutine stacks grow by (no read
// buffer is held while waiting: package http2's Guard takes it when bytes
// arrive): about 21 KiB per connection here (x/net/http2's server, which
// strait used before, held two goroutines and about 31).
func TestH2IdleConnectionMemory(t *testing.T) {
	be := newCountingBackend(t)
	proxy := startH2Proxy(t, CodecStrait, []*routev3.Route{prefixRoute("/", "be")}, nil, staticCluster("be", be.addr))
	const conns = 300
	const maxPerConn = 26 << 10
	open := func() {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fr := http2.NewFramer(c, c)
		_, _ = io.WriteString(c, http2.ClientPreface) // a failed write shows in what is read back
		_ = fr.WriteSettings()
		r := &rawH2{c: c, fr: fr}
		r.enc = hpack.NewEncoder(&r.hbuf)
		if err := r.headers(1, "GET", "/idle", true); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("reading the response: %v", err)
			}
			if f.Header().StreamID == 1 && f.Header().Flags.Has(http2.FlagDataEndStream) {
				return
			}
		}
	}
	open() // the upstream connection and the pools
	measure := func() (uint64, int) {
		time.Sleep(200 * time.Millisecond)
		runtime.GC()
		debug.FreeOSMemory()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse + ms.StackInuse, runtime.NumGoroutine()
	}
	m0, g0 := measure()
	for range conns {
		open()
	}
	m1, g1 := measure()
	per := (int64(m1) - int64(m0)) / conns
	t.Logf("%d idle HTTP/2 connections: %d bytes and %.2f goroutines each (Go heap and stacks, the test's client included)", conns, per, float64(g1-g0)/conns)
	if g1-g0 > conns+4 {
		t.Errorf("%d goroutines for %d idle connections, want one each", g1-g0, conns)
	}
	if per > maxPerConn && !raceDetector { // the race detector's shadow memory is not the proxy's
		t.Errorf("%d bytes per idle connection, want at most %d", per, maxPerConn)
	}
}
