package cluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	h2client "github.com/straitmesh/strait/internal/proxy/http2/client"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// goAwayBackend is a raw HTTP/2 server that counts the request HEADERS it
// receives on all its connections; on its first connection it answers
// the first stream's HEADERS with GOAWAY naming last stream 0 (the stream
// was received and not processed) and never answers it; later streams
// and connections get 200 "ok".
type goAwayBackend struct {
	ln    net.Listener
	mu    sync.Mutex
	heads int
	conns int
}

func newGoAwayBackend(t *testing.T) *goAwayBackend {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &goAwayBackend{ln: ln}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns++
			first := b.conns == 1
			b.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				b.serve(c, first)
			}()
		}
	}()
	return b
}

func (b *goAwayBackend) serve(c net.Conn, goAway bool) {
	defer c.Close()
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil {
		return
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if fr.WriteSettings() != nil {
		return
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			b.mu.Lock()
			b.heads++
			b.mu.Unlock()
			if goAway {
				_ = fr.WriteGoAway(0, http2.ErrCodeNo, nil)
				continue
			}
			hb.Reset()
			_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, BlockFragment: hb.Bytes(), EndHeaders: true})
			_ = fr.WriteData(f.StreamID, true, []byte("ok"))
		}
	}
}

func (b *goAwayBackend) counts() (heads, conns int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.heads, b.conns
}

// TestH2PoolNeverReplaysASentRequest: a request the server received and
// then refused with GOAWAY (above its last stream id) fails; the pool
// does not send it again on another connection. The next request goes
// out on a new connection. (x/net's Transport, STRAIT_H2_UPSTREAM=xnet,
// does send it again: it retries a GOAWAY'd stream whose body it can
// rewind, which is why it is no longer the default.)
func TestH2PoolNeverReplaysASentRequest(t *testing.T) {
	be := newGoAwayBackend(t)
	cfg := originalDstCluster("h2replay")
	cfg.TypedExtensionProtocolOptions = httpOptions(t, explicitH2(&corev3.Http2ProtocolOptions{}))
	c, err := build(cfg, stats.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	ep := Endpoint{Network: "tcp", Address: be.ln.Addr().String()}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://svc/once", bytes.NewReader([]byte("pay once")))
	resp, err := c.RoundTrip(req, ep)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a request refused by GOAWAY got %s", resp.Status)
	}
	var ga h2client.GoAwayError
	if !errors.As(err, &ga) {
		t.Fatalf("refused request: %v, want the GOAWAY", err)
	}
	if heads, conns := be.counts(); heads != 1 || conns != 1 {
		t.Fatalf("the server saw %d request heads on %d connections, want the request once", heads, conns)
	}
	if body, err := h2get(t, c, ep, "/next"); err != nil || body != "ok" {
		t.Fatalf("next request: %q, %v", body, err)
	}
	if heads, conns := be.counts(); heads != 2 || conns != 2 {
		t.Fatalf("after the next request: %d heads on %d connections, want 2 on 2", heads, conns)
	}
}
