package hcm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// These tests cover parked idle HTTP/2 connections (h2.go, package
// http2/server's park.go) on real sockets: an idle connection holds no
// goroutine, and still serves its next stream with the HPACK state it had,
// answers and sends keepalive PINGs, gets its idle_timeout's and a drain's
// GOAWAY, and ends on a protocol error as an unparked one does.

// startH2Parking runs the HCM (HTTP/2 allowed, mod applied) in front of a
// backend that echoes x-custom back as x-echo, serving every connection
// under d; it returns the proxy's address and Server.
func startH2Parking(t *testing.T, mod func(*hcmv3.HttpConnectionManager), d *Drain) (string, *Server) {
	t.Helper()
	be := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo", r.Header.Get("X-Custom"))
		_, _ = io.WriteString(w, "ok") // fails only when the client left
	})}
	bln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go be.Serve(bln)
	t.Cleanup(func() { be.Close() })
	log := slog.New(slog.DiscardHandler)
	cm := cluster.NewManager(log, stats.New())
	if err := cm.AddStatic([]*clusterv3.Cluster{staticCluster("be", bln.Addr().String())}); err != nil {
		t.Fatal(err)
	}
	router, _ := anypb.New(&routerv3.Router{})
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: "test",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{prefixRoute("/", "be")}}}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: routerFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	}
	if mod != nil {
		mod(h)
	}
	f, err := Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Options{Logger: log, Clusters: cm, Codec: CodecStrait})
	return serveDrain(t, s, f, d), s
}

// h2Client is an HTTP/2 client on one connection that keeps one HPACK
// encoder and decoder for its whole life (so that its later header blocks
// refer to fields its first ones indexed) and reads every frame itself.
type h2Client struct {
	t    *testing.T
	c    net.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	dec  *hpack.Decoder
	next uint32
}

func dialH2(t *testing.T, addr string) *h2Client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h := &h2Client{t: t, c: c, fr: http2.NewFramer(c, c), next: 1}
	h.enc = hpack.NewEncoder(&h.hbuf)
	h.dec = hpack.NewDecoder(4096, nil)
	h.fr.ReadMetaHeaders = h.dec
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := h.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return h
}

// get sends GET path with x-custom: custom (indexed by the encoder) and
// returns the response's x-echo; it answers SETTINGS and PINGs meanwhile.
func (h *h2Client) get(path, custom string) (string, error) {
	id := h.next
	h.next += 2
	h.hbuf.Reset()
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"}, {Name: ":authority", Value: "park.example"},
		{Name: ":path", Value: path}, {Name: "x-custom", Value: custom},
	} {
		_ = h.enc.WriteField(f) // into a bytes.Buffer
	}
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.hbuf.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		return "", err
	}
	_ = h.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer h.c.SetReadDeadline(time.Time{})
	echo := ""
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return "", err
		}
		if err := h.answer(f); err != nil {
			return "", err
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamID != id {
				continue
			}
			if st := f.PseudoValue("status"); st != "" && st != "200" {
				return "", fmt.Errorf("status %s", st)
			}
			if v := f.RegularFields(); len(v) > 0 {
				for _, hf := range v {
					if hf.Name == "x-echo" {
						echo = hf.Value
					}
				}
			}
			if f.StreamEnded() {
				return echo, nil
			}
		case *http2.DataFrame:
			if f.StreamID == id && f.StreamEnded() {
				return echo, nil
			}
		case *http2.GoAwayFrame:
			return "", fmt.Errorf("GOAWAY %v", f.ErrCode)
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				return "", fmt.Errorf("RST_STREAM %v", f.ErrCode)
			}
		}
	}
}

// answer acknowledges the server's SETTINGS and PINGs.
func (h *h2Client) answer(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if !f.IsAck() {
			return h.fr.WriteSettingsAck()
		}
	case *http2.PingFrame:
		if !f.IsAck() {
			return h.fr.WritePing(true, f.Data)
		}
	}
	return nil
}

// awaitParked waits until s holds n connections parked.
func awaitParked(t *testing.T, s *Server, n int) {
	t.Helper()
	if !waitFor(func() bool { return parkedCount(s) == n }) {
		t.Fatalf("%d connections parked, want %d", parkedCount(s), n)
	}
}

// TestH2ParkedConnectionResumes: idle HTTP/2 connections park (no
// goroutine, counted as active), and each serves its next streams after
// parking, with the HPACK dynamic tables of both ends carried over: the
// client's second request refers to the x-custom field its first one
// indexed, and the client's decoder keeps decoding the proxy's responses.
func TestH2ParkedConnectionResumes(t *testing.T) {
	for _, codec := range []hcmv3.HttpConnectionManager_CodecType{hcmv3.HttpConnectionManager_AUTO, hcmv3.HttpConnectionManager_HTTP2} {
		t.Run(codec.String(), func(t *testing.T) { testH2ParkedConnectionResumes(t, codec) })
	}
}

func testH2ParkedConnectionResumes(t *testing.T, codec hcmv3.HttpConnectionManager_CodecType) {
	addr, s := startH2Parking(t, func(h *hcmv3.HttpConnectionManager) { h.CodecType = codec }, nil)
	warm := dialH2(t, addr) // the upstream connection and its goroutines
	if _, err := warm.get("/warm", "w"); err != nil {
		t.Fatal(err)
	}
	warm.c.Close()
	if !waitFor(func() bool { return s.Active() == 0 }) {
		t.Fatal("the warm-up connection stayed open")
	}
	g0 := runtime.NumGoroutine()
	const n = 20
	clients := make([]*h2Client, n)
	for i := range clients {
		clients[i] = dialH2(t, addr)
		want := fmt.Sprintf("first-%d", i)
		if got, err := clients[i].get("/first", want); err != nil || got != want {
			t.Fatalf("client %d first request: %q, %v", i, got, err)
		}
	}
	awaitParked(t, s, n)
	if !parkedAll(g0, n/4) {
		t.Fatalf("goroutines %d with %d parked connections (started at %d)", runtime.NumGoroutine(), n, g0)
	}
	if got := s.Active(); got != n {
		t.Fatalf("Active() = %d with %d parked connections", got, n)
	}
	for round := range 3 {
		for i, c := range clients {
			// Round 0 repeats the first value: an indexed field, which only
			// the decoder's table kept across parking resolves.
			want := fmt.Sprintf("first-%d", i)
			if round > 0 {
				want = fmt.Sprintf("round%d-%d", round, i)
			}
			got, err := c.get(fmt.Sprintf("/again/%d", round), want)
			if err != nil || got != want {
				t.Fatalf("round %d, client %d after parking: x-echo %q, %v; want %q", round, i, got, err, want)
			}
		}
		awaitParked(t, s, n)
	}
}

// readUntil reads the client's frames (answering SETTINGS, and PINGs when
// answerPings) until match reports true or the connection ends (err).
func (h *h2Client) readUntil(d time.Duration, answerPings bool, match func(http2.Frame) bool) error {
	_ = h.c.SetReadDeadline(time.Now().Add(d))
	defer h.c.SetReadDeadline(time.Time{})
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return err
		}
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() && !answerPings {
			if match(f) {
				return nil
			}
			continue
		}
		if err := h.answer(f); err != nil {
			return err
		}
		if match(f) {
			return nil
		}
	}
}

// closedAfter reads until the connection ends; it reports whether it did
// within d (EOF or reset, not the deadline).
func (h *h2Client) closedAfter(d time.Duration) bool {
	err := h.readUntil(d, true, func(http2.Frame) bool { return false })
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestH2ParkedKeepalive: connection_keepalive's PINGs go out to a parked
// connection (and it parks again once answered); one whose PING goes
// unanswered is closed.
func TestH2ParkedKeepalive(t *testing.T) {
	const interval = 400 * time.Millisecond
	addr, s := startH2Parking(t, func(h *hcmv3.HttpConnectionManager) {
		h.Http2ProtocolOptions = &corev3.Http2ProtocolOptions{ConnectionKeepalive: &corev3.KeepaliveSettings{
			Interval: durationpb.New(interval), Timeout: durationpb.New(interval),
		}}
	}, nil)
	c := dialH2(t, addr)
	if _, err := c.get("/first", "x"); err != nil {
		t.Fatal(err)
	}
	awaitParked(t, s, 1)
	isPing := func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && !p.IsAck() }
	for i := range 2 {
		if err := c.readUntil(5*time.Second, true, isPing); err != nil {
			t.Fatalf("keepalive PING %d to a parked connection: %v", i, err)
		}
		awaitParked(t, s, 1)
	}
	if _, err := c.get("/after-pings", "y"); err != nil {
		t.Fatalf("request after the PINGs: %v", err)
	}
	// Unanswered, the next PING closes the connection.
	awaitParked(t, s, 1)
	if err := c.readUntil(5*time.Second, false, isPing); err != nil {
		t.Fatalf("keepalive PING: %v", err)
	}
	if !c.closedAfter(5 * time.Second) {
		t.Fatal("the connection stayed open with its PING unanswered")
	}
	if !waitFor(func() bool { return s.Active() == 0 }) {
		t.Fatalf("Active() = %d after the connection closed", s.Active())
	}
}

// goAwayThenClose reads until a GOAWAY arrives and the connection closes;
// it returns the first GOAWAY's code.
func (h *h2Client) goAwayThenClose(t *testing.T, d time.Duration) http2.ErrCode {
	t.Helper()
	var code http2.ErrCode
	got := false
	err := h.readUntil(d, true, func(f http2.Frame) bool {
		if ga, ok := f.(*http2.GoAwayFrame); ok && !got {
			code, got = ga.ErrCode, true
		}
		return false
	})
	var ne net.Error
	if !got {
		t.Fatalf("no GOAWAY (read: %v)", err)
	}
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection stayed open after its GOAWAY (read: %v)", err)
	}
	return code
}

// TestH2ParkedShutdown: a parked connection gets the GOAWAY of its
// idle_timeout, its max_connection_duration and its listener's drain, and
// is closed; the drain's end closes one that is parked.
func TestH2ParkedShutdown(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mod   func(*hcmv3.HttpConnectionManager)
		drain bool
	}{
		{name: "idle_timeout", mod: func(h *hcmv3.HttpConnectionManager) {
			h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(time.Second)}
		}},
		{name: "max_connection_duration", mod: func(h *hcmv3.HttpConnectionManager) {
			h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{MaxConnectionDuration: durationpb.New(time.Second)}
		}},
		{name: "drain", drain: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDrain()
			addr, s := startH2Parking(t, tc.mod, d)
			c := dialH2(t, addr)
			if _, err := c.get("/first", "x"); err != nil {
				t.Fatal(err)
			}
			awaitParked(t, s, 1)
			if tc.drain {
				d.Start()
			}
			if code := c.goAwayThenClose(t, 10*time.Second); code != http2.ErrCodeNo {
				t.Fatalf("GOAWAY %v, want NO_ERROR", code)
			}
			if !waitFor(func() bool { return s.Active() == 0 }) {
				t.Fatalf("Active() = %d after the connection closed", s.Active())
			}
		})
	}
	t.Run("server close", func(t *testing.T) {
		addr, s := startH2Parking(t, nil, nil)
		c := dialH2(t, addr)
		if _, err := c.get("/first", "x"); err != nil {
			t.Fatal(err)
		}
		awaitParked(t, s, 1)
		s.Close()
		if !c.closedAfter(10 * time.Second) {
			t.Fatal("Server.Close left a parked connection open")
		}
		if got := parkedCount(s); got != 0 {
			t.Fatalf("%d connections still counted as parked after Server.Close", got)
		}
	})
	t.Run("drain end", func(t *testing.T) {
		d := NewDrain()
		addr, s := startH2Parking(t, nil, d)
		c := dialH2(t, addr)
		if _, err := c.get("/first", "x"); err != nil {
			t.Fatal(err)
		}
		awaitParked(t, s, 1)
		d.End()
		if !c.closedAfter(10 * time.Second) {
			t.Fatal("the drain's end left a parked connection open")
		}
		if !waitFor(func() bool { return s.Active() == 0 }) {
			t.Fatalf("Active() = %d after the connection closed", s.Active())
		}
	})
}

// TestH2ParkedProtocolErrors: what a client sends to a parked connection
// is judged as it would be on one that never parked: a frame that breaks
// the protocol ends it with the same GOAWAY, and the guard's counts
// (premature resets) carry over parking.
func TestH2ParkedProtocolErrors(t *testing.T) {
	dataOnStream0 := func(h *h2Client) error {
		h.fr.AllowIllegalWrites = true
		return h.fr.WriteData(0, false, []byte("x"))
	}
	emptyFrames := func(h *h2Client) error {
		id := h.next
		h.next += 2
		h.hbuf.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "park.example"}, {":path", "/empty"}} {
			_ = h.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.hbuf.Bytes(), EndHeaders: true}); err != nil {
			return err
		}
		for range 3 {
			if err := h.fr.WriteData(id, false, nil); err != nil {
				return err
			}
		}
		return nil
	}
	for _, tc := range []struct {
		name string
		send func(*h2Client) error
		want http2.ErrCode
	}{
		{"DATA on stream 0", dataOnStream0, http2.ErrCodeProtocol},
		{"empty frames", emptyFrames, http2.ErrCodeEnhanceYourCalm},
	} {
		for _, park := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/parked=%v", tc.name, park), func(t *testing.T) {
				addr, s := startH2Parking(t, nil, nil)
				c := dialH2(t, addr)
				if _, err := c.get("/first", "x"); err != nil {
					t.Fatal(err)
				}
				if park {
					awaitParked(t, s, 1)
				}
				if err := tc.send(c); err != nil {
					t.Fatal(err)
				}
				if code := c.goAwayThenClose(t, 10*time.Second); code != tc.want {
					t.Fatalf("GOAWAY %v, want %v", code, tc.want)
				}
			})
		}
	}
	// Premature resets: some before parking, the rest after; together
	// they pass the guard's limit.
	t.Run("premature resets across parking", func(t *testing.T) {
		addr, s := startH2Parking(t, nil, nil)
		c := dialH2(t, addr)
		if _, err := c.get("/first", "x"); err != nil {
			t.Fatal(err)
		}
		reset := func(k int) error {
			for range k {
				id := c.next
				c.next += 2
				c.hbuf.Reset()
				for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "park.example"}, {":path", "/reset"}} {
					_ = c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
				}
				if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
					return err
				}
				if err := c.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
					return err
				}
			}
			return nil
		}
		if err := reset(prematureResetsBeforePark); err != nil {
			t.Fatal(err)
		}
		awaitParked(t, s, 1)
		_ = reset(prematureResetsAfterPark) // the proxy may close before the last ones

		if code := c.goAwayThenClose(t, 10*time.Second); code != http2.ErrCodeEnhanceYourCalm {
			t.Fatalf("GOAWAY %v, want ENHANCE_YOUR_CALM", code)
		}
	})
}

// The guard ends a connection at 20 premature resets that are at least
// half of its streams (package http2's prematureResetFloor): 12 before
// parking and 12 after pass it only if the first 12 still count.
const (
	prematureResetsBeforePark = 12
	prematureResetsAfterPark  = 12
)

// TestH2ParkedConnectionsConcurrentWake: many parked connections woken at
// once by their clients and by a drain do not lose a stream or hang.
func TestH2ParkedConnectionsConcurrentWake(t *testing.T) {
	d := NewDrain()
	addr, s := startH2Parking(t, nil, d)
	const n = 30
	clients := make([]*h2Client, n)
	for i := range clients {
		clients[i] = dialH2(t, addr)
		if _, err := clients[i].get("/first", "x"); err != nil {
			t.Fatal(err)
		}
	}
	awaitParked(t, s, n)
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprint(i)
			if got, err := c.get("/again", want); err != nil || got != want {
				// A drain may have come first: a GOAWAY, then the close.
				if err == nil || !strings.Contains(err.Error(), "GOAWAY") && !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset by peer") {
					t.Errorf("client %d: %q, %v", i, got, err)
				}
			}
		}()
	}
	d.Start()
	wg.Wait()
	d.End()
	if !waitFor(func() bool { return s.Active() == 0 }) {
		t.Fatalf("Active() = %d after the drain ended", s.Active())
	}
}
