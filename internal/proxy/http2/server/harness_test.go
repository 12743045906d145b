package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/straitmesh/strait/internal/proxy/wbatch"
)

// serverKind starts a server on loopback and returns its address.
type serverKind func(t *testing.T, h http.Handler, cfg Config) string

// ours serves each connection with this package.
func ours(t *testing.T, h http.Handler, cfg Config) string {
	t.Helper()
	cfg.Handler = h
	return listen(t, func(nc net.Conn) {
		New(wbatch.New(nc), cfg).Serve(context.Background())
	})
}

// theirs serves each connection with x/net/http2's Server.
func theirs(t *testing.T, h http.Handler, cfg Config) string {
	t.Helper()
	srv := &http2.Server{MaxConcurrentStreams: cfg.MaxConcurrentStreams, MaxUploadBufferPerStream: int32(cfg.StreamWindow), MaxUploadBufferPerConnection: int32(cfg.ConnWindow)}
	base := &http.Server{MaxHeaderBytes: int(cfg.MaxHeaderListSize)}
	if cfg.MaxHeaderListSize > 0 {
		base.MaxHeaderBytes = int(cfg.MaxHeaderListSize) - 320
	}
	return listen(t, func(nc net.Conn) {
		srv.ServeConn(nc, &http2.ServeConnOpts{Handler: h, BaseConfig: base})
	})
}

func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				serve(nc)
			}()
		}
	}()
	return ln.Addr().String()
}

// outcome is what a client saw of one stream.
type outcome struct {
	Status  string
	Header  map[string]string // the fields the test compares
	Body    string
	Trailer map[string]string
	Reset   http2.ErrCode // RST_STREAM's code; 0 with Ended
	Ended   bool          // END_STREAM received
}

// rawClient is a hostile HTTP/2 client on one connection: it writes what
// it is told and records what the server sends.
type rawClient struct {
	t    *testing.T
	c    net.Conn
	bw   *bufio.Writer
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer

	mu       sync.Mutex
	streams  map[uint32]*outcome
	goAways  []*http2.GoAwayFrame
	pings    int
	settings []http2.Setting
	changed  chan struct{} // signalled on each frame read
	closed   chan struct{}
}

// compared are the response fields the differential tests compare.
var compared = map[string]bool{"content-type": true, "x-custom": true, "content-length": true}

func dialRaw(t *testing.T, addr string, settings ...http2.Setting) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := &rawClient{t: t, c: c, bw: bufio.NewWriterSize(c, 64<<10), streams: map[uint32]*outcome{}, changed: make(chan struct{}, 1), closed: make(chan struct{})}
	r.fr = http2.NewFramer(r.bw, nil)
	r.enc = hpack.NewEncoder(&r.hbuf)
	_, _ = io.WriteString(r.bw, http2.ClientPreface)
	_ = r.fr.WriteSettings(settings...)
	r.flush()
	go r.read()
	return r
}

func (r *rawClient) flush() { _ = r.bw.Flush() }

func (r *rawClient) read() {
	defer close(r.closed)
	fr := http2.NewFramer(nil, r.c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				continue
			}
			return
		}
		r.mu.Lock()
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			o := r.stream(f.StreamID)
			if f.PseudoValue("status") != "" {
				o.Status = f.PseudoValue("status")
				for _, hf := range f.RegularFields() {
					if compared[hf.Name] {
						o.Header[hf.Name] = hf.Value
					}
				}
			} else {
				for _, hf := range f.RegularFields() {
					o.Trailer[hf.Name] = hf.Value
				}
			}
			o.Ended = o.Ended || f.StreamEnded()
		case *http2.DataFrame:
			o := r.stream(f.StreamID)
			o.Body += string(f.Data())
			o.Ended = o.Ended || f.StreamEnded()
		case *http2.RSTStreamFrame:
			r.stream(f.StreamID).Reset = f.ErrCode
		case *http2.GoAwayFrame:
			f2 := *f
			r.goAways = append(r.goAways, &f2)
		case *http2.PingFrame:
			if f.IsAck() {
				r.pings++
			}
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = f.ForeachSetting(func(s http2.Setting) error { r.settings = append(r.settings, s); return nil })
			}
		}
		r.mu.Unlock()
		select {
		case r.changed <- struct{}{}:
		default:
		}
	}
}

// stream returns the outcome of id (mu held).
func (r *rawClient) stream(id uint32) *outcome {
	o := r.streams[id]
	if o == nil {
		o = &outcome{Header: map[string]string{}, Trailer: map[string]string{}}
		r.streams[id] = o
	}
	return o
}

// headers writes a HEADERS frame with fields (name, value pairs).
func (r *rawClient) headers(id uint32, endStream bool, fields ...string) {
	r.hbuf.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		_ = r.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.hbuf.Bytes(), EndStream: endStream, EndHeaders: true})
}

// get writes a GET on id.
func (r *rawClient) get(id uint32, path string, extra ...string) {
	r.headers(id, true, append([]string{":method", "GET", ":scheme", "http", ":authority", "example.com", ":path", path}, extra...)...)
}

// waitFor waits (bounded) until cond holds over what was read.
func (r *rawClient) waitFor(what string, cond func() bool) bool {
	r.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-r.changed:
		case <-r.closed:
			r.mu.Lock()
			ok := cond()
			r.mu.Unlock()
			if !ok {
				r.t.Errorf("connection closed before %s", what)
			}
			return ok
		case <-deadline:
			r.t.Errorf("timed out waiting for %s", what)
			return false
		}
	}
}

// done reports whether stream id ended (END_STREAM or reset; mu held).
func (r *rawClient) done(id uint32) bool {
	o := r.streams[id]
	return o != nil && (o.Ended || o.Reset != 0)
}

// goAwayCode is the last GOAWAY's code, and whether there was one.
func (r *rawClient) goAwayCode() (http2.ErrCode, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.goAways) == 0 {
		return 0, false
	}
	return r.goAways[len(r.goAways)-1].ErrCode, true
}

// waitClosed waits (bounded) for the server to close the connection.
func (r *rawClient) waitClosed() bool {
	select {
	case <-r.closed:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}
