package hcm

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// frameLog is a raw h2c upstream that answers every request 200 "ok"
// once its stream ended, and records for each request whether its HEADERS
// carried END_STREAM and how many DATA frames followed.
type frameLog struct {
	mu   sync.Mutex
	seen map[string]string // path → "end-stream" or "data:N"
}

func (l *frameLog) serve(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var cmu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		cmu.Lock()
		for _, c := range conns {
			c.Close() // the proxy's pool keeps them open
		}
		cmu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			cmu.Lock()
			conns = append(conns, c)
			cmu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.conn(c)
			}()
		}
	}()
	return ln.Addr().String()
}

func (l *frameLog) conn(c net.Conn) {
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
	paths := map[uint32]string{}
	datas := map[uint32]int{}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	respond := func(id uint32) {
		hb.Reset()
		_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
		_ = fr.WriteData(id, true, []byte("ok"))
	}
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
			p := f.PseudoValue("path")
			if f.StreamEnded() {
				l.record(p, "end-stream")
				respond(f.StreamID)
				continue
			}
			paths[f.StreamID] = p
		case *http2.DataFrame:
			datas[f.StreamID]++
			if f.StreamEnded() {
				l.record(paths[f.StreamID], "data:"+strings.Repeat("|", datas[f.StreamID]))
				respond(f.StreamID)
			}
		}
	}
}

func (l *frameLog) record(path, what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[path] = what
}

// TestH2UpstreamEndStreamOnHeaders: an HTTP/2 request without a body
// (END_STREAM on its HEADERS, or content-length 0) goes upstream as one
// HEADERS frame with END_STREAM, no DATA frame after; a request with a
// body goes as HEADERS and DATA (the body writer may end the stream with
// an empty DATA frame of its own).
func TestH2UpstreamEndStreamOnHeaders(t *testing.T) {
	up := &frameLog{seen: map[string]string{}}
	addr := startH2Proxy(t, CodecStrait, []*routev3.Route{prefixRoute("/", "up")}, nil, h2Cluster(t, "up", up.serve(t)))
	c := h2cClient()
	tests := []struct {
		path, method, body string
		want               string
	}{
		{"/get", "GET", "", "end-stream"},
		{"/post-empty", "POST", "", "end-stream"},
		{"/post", "POST", "payload", "data:"},
	}
	for _, tt := range tests {
		var body io.Reader
		if tt.body != "" {
			body = strings.NewReader(tt.body)
		}
		req, err := http.NewRequest(tt.method, "http://"+addr+tt.path, body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tt.path, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(got) != "ok" {
			t.Fatalf("%s: %d %q", tt.path, resp.StatusCode, got)
		}
		up.mu.Lock()
		seen := up.seen[tt.path]
		up.mu.Unlock()
		if seen != tt.want && !(tt.want == "data:" && strings.HasPrefix(seen, "data:|")) {
			t.Errorf("%s went upstream as %q, want %q", tt.path, seen, tt.want)
		}
	}
}
