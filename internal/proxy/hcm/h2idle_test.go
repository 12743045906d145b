package hcm

import (
	"io"
	"net"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestH2IdleConnectionMemory opens HTTP/2 connections that each carry
// one request and then stay idle, and bounds what the proxy holds for
// each. An idle connection parks (package http2/server's park.go): no
// goroutine, no socket in the runtime's poller, no framer, buffer or
// HPACK encoder; its Conn, the peer's HPACK table, the guard's counts and
// the HCM's per-connection values stay, in one allocation (hcm's h2keep).
// That is about 3.2 KiB of live heap per connection here, the test's
// client side (its net.Conn and cleanup) included; before parking it was
// one goroutine and about 16 KiB of heap and stack each, and x/net/http2's
// server held two goroutines and about 30.
func TestH2IdleConnectionMemory(t *testing.T) {
	addr, s := startH2Parking(t, nil, nil)
	const conns = 300
	const maxPerConn = 4 << 10
	open := func() net.Conn {
		c, err := net.Dial("tcp", addr)
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
				return c
			}
		}
	}
	open().Close() // the upstream connection and the pools
	if !waitFor(func() bool { return s.Active() == 0 }) {
		t.Fatal("the warm-up connection stayed open")
	}
	g0, heap0 := runtime.NumGoroutine(), liveHeap()
	for range conns {
		open()
	}
	awaitParked(t, s, conns)
	per := (int64(liveHeap()) - int64(heap0)) / conns
	g1 := runtime.NumGoroutine()
	t.Logf("%d idle HTTP/2 connections: %d bytes of live heap and %.2f goroutines each (the test's client side included)", conns, per, float64(g1-g0)/conns)
	if g1-g0 > conns/20 {
		t.Errorf("%d goroutines for %d idle connections, want none each", g1-g0, conns)
	}
	if per > maxPerConn && !raceDetector { // the race detector's shadow memory is not the proxy's
		t.Errorf("%d bytes per idle connection, want at most %d", per, maxPerConn)
	}
}

// TestH2KeepSize: what a parked HTTP/2 connection keeps is mostly its
// h2keep (the server connection, its guard and batched writer, the
// streams' conn), one allocation that fits the runtime's 896-byte size
// class; one byte more and it takes the 1,024-byte class (bench/http/idle.sh
// MODE=h2 measures the difference). A field added to any of them needs
// one taken out, or this bound raised knowingly.
func TestH2KeepSize(t *testing.T) {
	if n := unsafe.Sizeof(h2keep{}); n > 896 {
		t.Errorf("h2keep is %d bytes, past the 896-byte size class", n)
	}
}
