package hcm

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestH2StreamIdleWhileFlowControlled is a client that opens a stream with
// a send window of 0 and never grants more: the response's body cannot
// move, and the stream idle timeout must still end the stream (Envoy
// counts waiting for flow-control window as idle), reset it and cancel the
// upstream request, rather than pin the stream, its goroutine and its
// upstream request for as long as the client likes.
func TestH2StreamIdleWhileFlowControlled(t *testing.T) {
	t.Run("window 0", func(t *testing.T) { testH2FlowStall(t, false) })
	t.Run("socket never read", func(t *testing.T) { testH2FlowStall(t, true) })
}

// testH2FlowStall: with socketStall the client opens every window wide and
// then stops reading its socket, so the proxy's writes block in the kernel.
func testH2FlowStall(t *testing.T, socketStall bool) {
	var cancelled atomic.Int32
	big := bytes.Repeat([]byte("b"), 1<<20)
	if socketStall {
		big = bytes.Repeat([]byte("b"), 64<<20)
	}
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		if _, err := w.Write(big); err != nil || r.Context().Err() != nil {
			cancelled.Add(1)
			return
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		cancelled.Add(1)
	}))
	t.Cleanup(be.Close)
	const idle = time.Second
	addr := startH2Proxy(t, CodecStrait, []*routev3.Route{prefixRoute("/", "be")}, func(h *hcmv3.HttpConnectionManager) {
		h.StreamIdleTimeout = durationpb.New(idle)
	}, staticCluster("be", be.Listener.Addr().String()))

	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	win := uint32(0)
	if socketStall {
		win = 1<<31 - 1
	}
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: win}); err != nil {
		t.Fatal(err)
	}
	if socketStall {
		if err := fr.WriteWindowUpdate(0, 1<<31-1-65535); err != nil {
			t.Fatal(err)
		}
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "be"}, {":path", "/big"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if socketStall {
		// Never read: the upstream request must still end after the
		// stream idle timeout.
		if !waitForD(func() bool { return cancelled.Load() >= 1 }, idle+10*time.Second) {
			t.Fatalf("the upstream request of a stream whose client stopped reading was not cancelled %v after the stream idle timeout", 10*time.Second)
		}
		return
	}
	_ = c.SetReadDeadline(start.Add(idle + 10*time.Second))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no RST_STREAM for the flow-controlled stream %v after it was sent (stream idle timeout %v): %v", time.Since(start).Round(time.Millisecond), idle, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.DataFrame:
			if f.StreamID == 1 && len(f.Data()) > 0 {
				t.Fatalf("got %d bytes of DATA on a stream whose window is 0", len(f.Data()))
			}
		case *http2.RSTStreamFrame:
			if f.StreamID != 1 {
				continue
			}
			if el := time.Since(start); el < idle {
				t.Fatalf("stream reset after %v, before its idle timeout %v", el, idle)
			}
			if !waitFor(func() bool { return cancelled.Load() >= 1 }) {
				t.Fatal("the upstream request was not cancelled when the stalled stream was reset")
			}
			return
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v instead of a reset of the one stream", f.ErrCode)
		}
	}
}

func waitForD(cond func() bool, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}
