package hcm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// countingBackend counts the requests per path and the connections it
// has open; it speaks HTTP/1.1 and h2c (prior knowledge).
type countingBackend struct {
	addr     string
	mu       sync.Mutex
	requests map[string]int
	open     atomic.Int64
}

func newCountingBackend(t *testing.T) *countingBackend {
	t.Helper()
	b := &countingBackend{requests: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.addr = ln.Addr().String()
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b.mu.Lock()
			b.requests[r.URL.Path]++
			b.mu.Unlock()
			_, _ = io.WriteString(w, "ok") // a handler's write fails only when the client has gone
		}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				b.open.Add(1)
			case http.StateClosed, http.StateHijacked:
				b.open.Add(-1)
			}
		},
		Protocols: new(http.Protocols),
	}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return b
}

func (b *countingBackend) count(path string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests[path]
}

// rssBytes is the process's resident set size.
// memoryInUse is what an attack must not leave held: the process's RSS,
// or under the race detector, whose shadow memory for the attack's
// thousands of goroutines stays in RSS for good (about 30 MiB here,
// whatever the proxy does), the Go heap and stacks in use.
func memoryInUse() (int64, string) {
	if raceDetector {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapInuse + ms.StackInuse), "Go heap and stacks"
	}
	return rssBytes(), "RSS"
}

func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// rawH2 is a hostile HTTP/2 client on one connection: it writes frames
// with a Framer and reads the server's frames in the background.
type rawH2 struct {
	c      net.Conn
	bw     *bufio.Writer
	fr     *http2.Framer
	enc    *hpack.Encoder
	hbuf   bytes.Buffer
	goAway chan http2.ErrCode // the server's GOAWAY code
	closed chan struct{}      // the server closed the connection
}

func dialRawH2(t *testing.T, addr string) *rawH2 {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := &rawH2{c: c, bw: bufio.NewWriterSize(c, 64<<10), goAway: make(chan http2.ErrCode, 1), closed: make(chan struct{})}
	r.fr = http2.NewFramer(r.bw, nil)
	r.enc = hpack.NewEncoder(&r.hbuf)
	_, _ = io.WriteString(r.bw, http2.ClientPreface) // a failed write shows in what the test reads back
	_ = r.fr.WriteSettings()                         // a failed write shows in what the test reads back
	r.bw.Flush()
	go func() {
		defer close(r.closed)
		fr := http2.NewFramer(nil, c)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				var se http2.StreamError
				if errors.As(err, &se) {
					continue
				}
				return
			}
			if ga, ok := f.(*http2.GoAwayFrame); ok {
				select {
				case r.goAway <- ga.ErrCode:
				default:
				}
			}
		}
	}()
	return r
}

// headers writes a request's HEADERS on stream id.
func (r *rawH2) headers(id uint32, method, path string, endStream bool) error {
	r.hbuf.Reset()
	for _, f := range [][2]string{{":method", method}, {":scheme", "http"}, {":authority", "example.com"}, {":path", path}} {
		_ = r.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}) // into a bytes.Buffer, which does not fail
	}
	return r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.hbuf.Bytes(), EndStream: endStream, EndHeaders: true})
}

// closedWithGoAway waits (bounded) for the server's GOAWAY and close.
func (r *rawH2) closedWithGoAway(t *testing.T, want http2.ErrCode) {
	t.Helper()
	select {
	case code := <-r.goAway:
		if code != want {
			t.Errorf("GOAWAY %v, want %v", code, want)
		}
	case <-time.After(10 * time.Second):
		t.Error("no GOAWAY from the proxy")
		return
	}
	select {
	case <-r.closed:
	case <-time.After(10 * time.Second):
		t.Error("the proxy kept the connection open after its GOAWAY")
	}
}

// TestH2RapidReset performs CVE-2023-44487 through the proxy: 10,000
// HEADERS+RST_STREAM on one connection. The proxy must close the
// connection (Envoy's premature reset limit), send the backend at most a
// few requests, leave no upstream connections behind, and keep serving a
// legitimate client on another connection.
func TestH2RapidReset(t *testing.T) {
	for _, tc := range []struct {
		upstream string
		paced    bool // one write per HEADERS+RST_STREAM, not a burst
	}{{"http1", false}, {"http2", false}, {"http1", true}, {"http2", true}} {
		upstream := tc.upstream
		name := upstream
		if tc.paced {
			name += "/paced"
		}
		t.Run(name, func(t *testing.T) {
			be := newCountingBackend(t)
			cl := staticCluster("be", be.addr)
			if upstream == "http2" {
				cl = h2Cluster(t, "be", be.addr)
			}
			proxy := startH2Proxy(t, CodecStrait, []*routev3.Route{prefixRoute("/", "be")}, nil, []*clusterv3.Cluster{cl}...)

			// Warm up: the legitimate client's connection and the pool.
			legit := h2cClient()
			defer legit.CloseIdleConnections()
			get := func() error {
				resp, err := legit.Get("http://" + proxy + "/legit")
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
				if resp.StatusCode != 200 {
					return errors.New(resp.Status)
				}
				return nil
			}
			if err := get(); err != nil {
				t.Fatal(err)
			}
			debug.FreeOSMemory()
			g0, f0 := runtime.NumGoroutine(), countFDs()
			mem0, _ := memoryInUse()

			ctx, stop := context.WithCancel(context.Background())
			var legitOK, legitFailed atomic.Int64
			var legitErr atomic.Value
			legitDone := make(chan struct{})
			go func() {
				defer close(legitDone)
				for ctx.Err() == nil {
					if err := get(); err != nil {
						legitFailed.Add(1)
						legitErr.Store(err.Error())
						continue
					}
					legitOK.Add(1)
				}
			}()

			r := dialRawH2(t, proxy)
			const streams = 10000
			sent := 0
			for i := range streams {
				id := uint32(2*i + 1)
				if r.headers(id, "GET", "/attack", true) != nil || r.fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
					break
				}
				if tc.paced && r.bw.Flush() != nil {
					break
				}
				sent++
			}
			r.bw.Flush()
			r.closedWithGoAway(t, http2.ErrCodeEnhanceYourCalm)
			// A few more legitimate requests after the attack.
			for n := legitOK.Load(); !waitFor(func() bool { return legitOK.Load() >= n+3 }); {
				t.Fatal("the legitimate client was not served after the attack")
			}
			stop()
			<-legitDone
			legit.CloseIdleConnections()

			got := be.count("/attack")
			t.Logf("%d streams sent before the close; backend saw %d of them; legitimate: %d ok, %d failed", sent, got, legitOK.Load(), legitFailed.Load())
			if got > 30 {
				t.Errorf("the backend saw %d of the reset requests, want at most 30", got)
			}
			if n := legitFailed.Load(); n > 0 {
				t.Errorf("%d legitimate requests failed during the attack (last: %v)", n, legitErr.Load())
			}
			// Upstream: no connection stays for a reset stream (one that
			// carried a request the backend answered may stay pooled).
			if !waitFor(func() bool { return be.open.Load() <= 1+int64(got) }) {
				t.Errorf("%d upstream connections still open after the attack", be.open.Load())
			}
			if !waitFor(func() bool { return runtime.NumGoroutine() <= g0+4 && countFDs() <= f0+2 }) {
				t.Errorf("goroutines %d -> %d, fds %d -> %d after the attack", g0, runtime.NumGoroutine(), f0, countFDs())
			}
			debug.FreeOSMemory()
			mem, what := memoryInUse()
			if grew := mem - mem0; grew > 20<<20 {
				t.Errorf("%s grew by %d MiB", what, grew>>20)
			} else {
				t.Logf("%s %+d KiB", what, grew>>10)
			}
		})
	}
}

// TestH2EmptyDataFlood sends empty DATA frames on an open stream; Envoy
// (max_consecutive_inbound_frames_with_empty_payload, default 1) closes the
// connection at the second consecutive one.
func TestH2EmptyDataFlood(t *testing.T) {
	be := newCountingBackend(t)
	proxy := startH2Proxy(t, CodecStrait, []*routev3.Route{prefixRoute("/", "be")}, nil, staticCluster("be", be.addr))
	r := dialRawH2(t, proxy)
	if err := r.headers(1, "POST", "/upload", false); err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if r.fr.WriteData(1, false, nil) != nil {
			break
		}
	}
	r.bw.Flush()
	r.closedWithGoAway(t, http2.ErrCodeEnhanceYourCalm)
}
