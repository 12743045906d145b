package cluster

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// silentH2Backend is a raw HTTP/2 server that answers every request with
// 200 "ok" but never acknowledges a PING: a peer whose connection looks
// open and is dead. It reports each accepted connection on accepted and
// each connection the client closed on closed.
type silentH2Backend struct {
	ln       net.Listener
	accepted chan int
	closed   chan int
}

func newSilentH2Backend(t *testing.T) *silentH2Backend {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &silentH2Backend{ln: ln, accepted: make(chan int, 16), closed: make(chan int, 16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 1; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.accepted <- n
			go b.serve(n, c)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return b
}

func (b *silentH2Backend) serve(n int, c net.Conn) {
	defer c.Close()
	defer func() { b.closed <- n }()
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(c, c)
	if fr.WriteSettings() != nil {
		return
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return // the client closed the connection
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			hb.Reset()
			_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, BlockFragment: hb.Bytes(), EndHeaders: true})
			_ = fr.WriteData(f.StreamID, true, []byte("ok"))
		case *http2.PingFrame:
			// Never ACKed.
		}
	}
}

// TestH2KeepaliveClosesDeadConnection: with connection_keepalive, a
// connection whose PING gets no ACK within the timeout is closed, and the
// next request opens a new connection and succeeds.
func TestH2KeepaliveClosesDeadConnection(t *testing.T) {
	be := newSilentH2Backend(t)
	cfg := originalDstCluster("h2ka")
	cfg.TypedExtensionProtocolOptions = httpOptions(t, explicitH2(&corev3.Http2ProtocolOptions{
		ConnectionKeepalive: &corev3.KeepaliveSettings{
			Interval: durationpb.New(50 * time.Millisecond),
			Timeout:  durationpb.New(50 * time.Millisecond),
		},
	}))
	c, err := build(cfg, stats.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	ep := Endpoint{Network: "tcp", Address: be.ln.Addr().String()}
	wait := func(ch chan int, what string) int {
		t.Helper()
		select {
		case n := <-ch:
			return n
		case <-time.After(10 * time.Second):
			t.Fatalf("no connection %s within 10s", what)
			return 0
		}
	}
	if body, err := h2get(t, c, ep, "/"); err != nil || body != "ok" {
		t.Fatalf("first request: %q, %v", body, err)
	}
	first := wait(be.accepted, "accepted")
	if got := wait(be.closed, "closed by the keepalive"); got != first {
		t.Fatalf("connection %d closed, want %d", got, first)
	}
	if body, err := h2get(t, c, ep, "/"); err != nil || body != "ok" {
		t.Fatalf("request after the dead connection: %q, %v", body, err)
	}
	if second := wait(be.accepted, "accepted"); second != first+1 {
		t.Fatalf("second request on connection %d, want a new connection %d", second, first+1)
	}
}

func TestH2KeepaliveOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ka      *corev3.KeepaliveSettings
		wantErr string
	}{
		{"interval and timeout", &corev3.KeepaliveSettings{Interval: durationpb.New(time.Second), Timeout: durationpb.New(time.Second)}, ""},
		{"no timeout", &corev3.KeepaliveSettings{Interval: durationpb.New(time.Second)}, "connection_keepalive.timeout is required"},
		{"jitter", &corev3.KeepaliveSettings{Timeout: durationpb.New(time.Second), IntervalJitter: nil, ConnectionIdleInterval: durationpb.New(time.Second)},
			"connection_keepalive.connection_idle_interval is not supported"},
	} {
		s, err := ParseHTTP2Options("h2", &corev3.Http2ProtocolOptions{ConnectionKeepalive: tc.ka})
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantErr)
		case tc.wantErr == "" && (s.KeepaliveInterval != time.Second || s.KeepaliveTimeout != time.Second):
			t.Errorf("%s: interval %v timeout %v, want 1s and 1s", tc.name, s.KeepaliveInterval, s.KeepaliveTimeout)
		}
	}
}
