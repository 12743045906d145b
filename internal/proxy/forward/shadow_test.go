package forward

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	upstreamhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/route"
)

var (
	hopAlways   = httpfilter.Fraction{Num: 100, Den: 100}
	hopToMirror = []route.Mirror{{Cluster: "mirror", Fraction: hopAlways}}
)

// hopParseH1 parses an HTTP/1.1 request head.
func hopParseH1(t *testing.T, head string) *http1.Request {
	t.Helper()
	req := &http1.Request{}
	if err := http1.ParseRequest([]byte(head), req); err != nil {
		t.Fatalf("parse %q: %v", head, err)
	}
	return req
}

// TestMirrorH1: the shadow of an HTTP/1.1 request goes to the mirror
// cluster with "-shadow" after the host name, the same method, target
// and body, without the hop-by-hop fields, Content-Length (the transport
// frames the copy) and Expect, with the x-forwarded-proto the main
// request leaves with; its response is counted for the mirror cluster
// and dropped.
func TestMirrorH1(t *testing.T) {
	h := newHopShadow(t)
	req := hopParseH1(t, "POST /p?q=1 HTTP/1.1\r\nHost: app.local:8080\r\nConnection: x-hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\n"+
		"Content-Length: 4\r\nExpect: 100-continue\r\nUser-Agent: curl/8\r\nX-Keep: k\r\nX-Keep: k2\r\nX-Forwarded-Proto: http\r\n\r\n")
	buffered := []byte("bodyNEXT")
	h.sh.MirrorH1(hopToMirror, req, buffered, "https", "http")
	copy(buffered, "XXXX") // the connection's buffer is reused at once
	s := h.be.next(t)
	h.settle(t)
	if s.Method != "POST" || s.URI != "/p?q=1" || s.Host != "app.local-shadow:8080" || s.Body != "body" || s.ContentLength != 4 {
		t.Errorf("shadow %s %s host %q body %q length %d, want POST /p?q=1 host app.local-shadow:8080 body \"body\" length 4",
			s.Method, s.URI, s.Host, s.Body, s.ContentLength)
	}
	for _, k := range []string{"Connection", "X-Hop", "Keep-Alive", "Expect"} {
		if v, ok := s.Header[k]; ok {
			t.Errorf("shadow carries %s: %q", k, v)
		}
	}
	if g := s.Header.Values("X-Keep"); !slices.Equal(g, []string{"k", "k2"}) {
		t.Errorf("X-Keep = %q, want k, k2", g)
	}
	if g := s.Header.Values("X-Forwarded-Proto"); !slices.Equal(g, []string{"https"}) {
		t.Errorf("X-Forwarded-Proto = %q, want https alone", g)
	}
	if g := s.Header.Get("User-Agent"); g != "curl/8" {
		t.Errorf("User-Agent = %q, want curl/8", g)
	}
	var text strings.Builder
	if err := h.st.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "cluster.mirror.upstream_rq_202: 1\n") {
		t.Errorf("the shadow's 202 is not counted for the mirror cluster:\n%s", text.String())
	}
}

// TestMirrorH1AbsoluteForm: an absolute-form target's shadow carries the
// path and query, the authority as its host; a mirror with
// disable_shadow_host_suffix_append keeps the host as it is; a request
// without a body or User-Agent is mirrored without them (no Go default).
func TestMirrorH1AbsoluteForm(t *testing.T) {
	h := newHopShadow(t)
	req := hopParseH1(t, "GET http://abs.example/a/b?x=y HTTP/1.1\r\nHost: abs.example\r\n\r\n")
	h.sh.MirrorH1([]route.Mirror{{Cluster: "mirror", Fraction: hopAlways}, {Cluster: "mirror", Fraction: hopAlways, NoHostSuffix: true}},
		req, nil, "http", "http")
	got := []hopSeen{h.be.next(t), h.be.next(t)}
	h.settle(t)
	slices.SortFunc(got, func(a, b hopSeen) int { return strings.Compare(a.Host, b.Host) })
	for i, host := range []string{"abs.example", "abs.example-shadow"} {
		s := got[i]
		if s.Host != host || s.URI != "/a/b?x=y" || s.Method != "GET" {
			t.Errorf("shadow %d: %s %s host %q, want GET /a/b?x=y host %q", i, s.Method, s.URI, s.Host, host)
		}
		if s.Body != "" || s.ContentLength != 0 || len(s.TransferEncoding) != 0 {
			t.Errorf("shadow %d: body %q length %d transfer-encoding %q, want none", i, s.Body, s.ContentLength, s.TransferEncoding)
		}
		if v, ok := s.Header["User-Agent"]; ok {
			t.Errorf("shadow %d: User-Agent %q, want none", i, v)
		}
	}
}

// TestMirrorH1Skipped: a request whose body is too long, not all at hand
// or chunked is not mirrored, nor is one whose mirrors' runtime fraction
// misses; the bounds are inclusive. Only the mirror that hits is sent.
func TestMirrorH1Skipped(t *testing.T) {
	h := newHopShadow(t)
	never := []route.Mirror{{Cluster: "never", Fraction: httpfilter.Never}}
	big := bytes.Repeat([]byte("b"), maxShadowBody+1)
	for _, c := range []struct {
		head     string
		buffered []byte
		mirrors  []route.Mirror
	}{
		{"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 65537\r\n\r\n", big, hopToMirror},
		{"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n", []byte("1234"), hopToMirror},
		{"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", []byte("4\r\nbody\r\n0\r\n\r\n"), hopToMirror},
		{"GET / HTTP/1.1\r\nHost: a\r\n\r\n", nil, never},
		{"GET / HTTP/1.1\r\nHost: a\r\n\r\n", nil, nil},
	} {
		h.sh.MirrorH1(c.mirrors, hopParseH1(t, c.head), c.buffered, "http", "http")
	}
	if l := h.cl.lookups(); len(l) != 0 {
		t.Fatalf("requests not to mirror were: %q", l)
	}
	// At the bounds: a body of maxShadowBody, exactly all at hand; a
	// missed mirror does not stop the next one.
	req := hopParseH1(t, "PUT /max HTTP/1.1\r\nHost: a\r\nContent-Length: 65536\r\n\r\n")
	h.sh.MirrorH1(append(slices.Clone(never), hopToMirror...), req, big[:maxShadowBody], "http", "http")
	s := h.be.next(t)
	h.settle(t)
	if s.URI != "/max" || len(s.Body) != maxShadowBody {
		t.Errorf("shadow %s with %d bytes, want /max with %d", s.URI, len(s.Body), maxShadowBody)
	}
	if l := h.cl.lookups(); !slices.Equal(l, []string{"mirror"}) {
		t.Errorf("clusters looked up %q, want mirror alone", l)
	}
}

// TestMirrorStream: an HTTP/2 (net/http) request's body of known length
// is read, given back to the main request whole and sent with the
// shadow; hop-by-hop fields are dropped.
func TestMirrorStream(t *testing.T) {
	h := newHopShadow(t)
	r := httptest.NewRequest(http.MethodPut, "http://app.local/s%2Fx?k=v", strings.NewReader("stream-body"))
	r.Header.Set("Connection", "x-hop")
	r.Header.Set("X-Hop", "1")
	r.Header.Set("Te", "trailers")
	r.Header.Set("X-Keep", "k")
	r.Header.Set("User-Agent", "grpc-go/1")
	h.sh.MirrorStream([]route.Mirror{{Cluster: "never", Fraction: httpfilter.Never}, {Cluster: "mirror", Fraction: hopAlways}}, r)
	main, err := io.ReadAll(r.Body)
	if err != nil || string(main) != "stream-body" {
		t.Errorf("main request body %q %v, want stream-body", main, err)
	}
	s := h.be.next(t)
	h.settle(t)
	if s.Method != "PUT" || s.URI != "/s%2Fx?k=v" || s.Host != "app.local-shadow" || s.Body != "stream-body" || s.ContentLength != 11 {
		t.Errorf("shadow %s %s host %q body %q length %d, want PUT /s%%2Fx?k=v host app.local-shadow body stream-body length 11",
			s.Method, s.URI, s.Host, s.Body, s.ContentLength)
	}
	for _, k := range []string{"Connection", "X-Hop", "Te"} {
		if v, ok := s.Header[k]; ok {
			t.Errorf("shadow carries %s: %q", k, v)
		}
	}
	if s.Header.Get("X-Keep") != "k" || s.Header.Get("User-Agent") != "grpc-go/1" {
		t.Errorf("shadow headers %v: X-Keep or User-Agent lost", s.Header)
	}
	if l := h.cl.lookups(); !slices.Equal(l, []string{"mirror"}) {
		t.Errorf("clusters looked up %q, want mirror alone", l)
	}
}

// TestMirrorStreamBodies: bodies of unknown length or over maxShadowBody
// are not mirrored and stay untouched; one of exactly maxShadowBody is;
// no body, or an empty one, is mirrored without a body.
func TestMirrorStreamBodies(t *testing.T) {
	h := newHopShadow(t)
	unknown := &http.Request{Method: "POST", URL: hopURL(t, "/u"), Host: "a", Header: http.Header{}, Body: io.NopCloser(strings.NewReader("abc")), ContentLength: -1}
	over := &http.Request{Method: "POST", URL: hopURL(t, "/o"), Host: "a", Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(make([]byte, maxShadowBody+1))), ContentLength: maxShadowBody + 1}
	for _, r := range []*http.Request{unknown, over} {
		before := r.Body
		h.sh.MirrorStream(hopToMirror, r)
		if r.Body != before {
			t.Errorf("%s: the body was replaced", r.URL.Path)
		}
	}
	if l := h.cl.lookups(); len(l) != 0 {
		t.Fatalf("requests not to mirror were: %q", l)
	}

	empty := io.NopCloser(strings.NewReader(""))
	for _, r := range []*http.Request{
		{Method: "GET", URL: hopURL(t, "/nil"), Host: "a", Header: http.Header{}},
		// A declared length with no body at hand: there is nothing to read.
		{Method: "GET", URL: hopURL(t, "/nil-length"), Host: "a", Header: http.Header{}, ContentLength: 5},
		{Method: "GET", URL: hopURL(t, "/nobody"), Host: "a", Header: http.Header{}, Body: http.NoBody},
		{Method: "GET", URL: hopURL(t, "/empty"), Host: "a", Header: http.Header{}, Body: empty},
	} {
		h.sh.MirrorStream(hopToMirror, r)
		if r.URL.Path == "/empty" && r.Body != empty {
			t.Error("/empty: a body of length 0 was replaced")
		}
		s := h.be.next(t)
		if s.URI != r.URL.Path || s.Body != "" || s.ContentLength != 0 || len(s.TransferEncoding) != 0 {
			t.Errorf("shadow of %s: %s body %q length %d transfer-encoding %q, want no body", r.URL.Path, s.URI, s.Body, s.ContentLength, s.TransferEncoding)
		}
	}

	full := bytes.Repeat([]byte("m"), maxShadowBody)
	r := &http.Request{Method: "POST", URL: hopURL(t, "/max"), Host: "a", Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(full)), ContentLength: maxShadowBody}
	h.sh.MirrorStream(hopToMirror, r)
	if s := h.be.next(t); s.URI != "/max" || s.Body != string(full) {
		t.Errorf("shadow %s with %d bytes, want /max with %d", s.URI, len(s.Body), maxShadowBody)
	}
	if b, _ := io.ReadAll(r.Body); !bytes.Equal(b, full) {
		t.Errorf("main body: %d bytes, want %d", len(b), len(full))
	}
	h.settle(t)
}

// hopFailingBody returns its data, then an error.
type hopFailingBody struct {
	data string
	err  error
}

func (b *hopFailingBody) Read(p []byte) (int, error) {
	if b.data == "" {
		return 0, b.err
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

func (b *hopFailingBody) Close() error { return nil }

// TestMirrorStreamReadError: when the body fails while it is read for
// the shadow, nothing is mirrored and the main request sees the bytes
// read so far, then the error.
func TestMirrorStreamReadError(t *testing.T) {
	h := newHopShadow(t)
	broken := errors.New("stream reset")
	r := &http.Request{Method: "POST", URL: hopURL(t, "/b"), Host: "a", Header: http.Header{}, Body: &hopFailingBody{data: "par", err: broken}, ContentLength: 10}
	h.sh.MirrorStream(hopToMirror, r)
	b, err := io.ReadAll(r.Body)
	if string(b) != "par" || !errors.Is(err, broken) {
		t.Errorf("main body %q %v, want par then %v", b, err, broken)
	}
	h.settle(t)
	if l := h.cl.lookups(); len(l) != 0 {
		t.Errorf("mirrored although its body failed: %q", l)
	}
}

// TestShadowDropped: no shadow is started after Close, nor beyond
// maxShadows in flight; a shadow to an unknown or empty cluster is
// dropped without harm.
func TestShadowDropped(t *testing.T) {
	h := newHopShadow(t)
	for range maxShadows {
		h.sh.slots <- struct{}{}
	}
	h.sh.MirrorStream(hopToMirror, &http.Request{Method: "GET", URL: hopURL(t, "/full"), Host: "a", Header: http.Header{}})
	for range maxShadows {
		<-h.sh.slots
	}
	h.sh.MirrorStream([]route.Mirror{{Cluster: "nope", Fraction: hopAlways}, {Cluster: "empty", Fraction: hopAlways}},
		&http.Request{Method: "GET", URL: hopURL(t, "/gone"), Host: "a", Header: http.Header{}})
	h.settle(t)
	l := h.cl.lookups()
	slices.Sort(l)
	if !slices.Equal(l, []string{"empty", "nope"}) {
		t.Errorf("clusters looked up %q, want empty and nope (none while the slots were full)", l)
	}
	h.sh.MirrorStream(hopToMirror, &http.Request{Method: "GET", URL: hopURL(t, "/closed"), Host: "a", Header: http.Header{}})
	h.sh.Close()
	if n := len(h.cl.lookups()); n != 2 {
		t.Errorf("a shadow was sent after Close: %q", h.cl.lookups())
	}
	if n := len(h.sh.slots); n != 0 {
		t.Errorf("%d slots held after Close", n)
	}
	select {
	case s := <-h.be.seen:
		t.Errorf("the backend got %s", s.URI)
	default:
	}
}

func hopURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.ParseRequestURI(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestShadowH2Cluster: a shadow to an HTTP/2 cluster goes in HTTP/2 with
// the :scheme "http" when the request had none (a server request's URL
// carries no scheme).
func TestShadowH2Cluster(t *testing.T) {
	be := newHopBackendH2C(t, true)
	a, err := anypb.New(&upstreamhttp.HttpProtocolOptions{UpstreamProtocolOptions: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_{
		ExplicitHttpConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}}}}})
	if err != nil {
		t.Fatal(err)
	}
	c := hopStaticCluster("mirror", be.addr())
	c.TypedExtensionProtocolOptions = map[string]*anypb.Any{cluster.HTTPProtocolOptionsKey: a}
	cm, _ := hopManager(t, c)
	sh := NewShadowing(slog.New(slog.DiscardHandler), cm)
	t.Cleanup(sh.Close)
	sh.MirrorStream(hopToMirror, &http.Request{Method: "GET", URL: hopURL(t, "/h2?a=b"), Host: "svc", Header: http.Header{}})
	s := be.next(t)
	if s.ProtoMajor != 2 || s.URI != "/h2?a=b" || s.Host != "svc-shadow" {
		t.Errorf("shadow HTTP/%d %s host %q, want HTTP/2 /h2?a=b host svc-shadow", s.ProtoMajor, s.URI, s.Host)
	}
}

// TestShadowHostEmptyName: an authority that is a port alone still gets
// the suffix before the port, as for any host name.
func TestShadowHostEmptyName(t *testing.T) {
	for host, want := range map[string]string{":80": "-shadow:80", "": "-shadow", "a:": "a-shadow:"} {
		if got := shadowHost(host); got != want {
			t.Errorf("shadowHost(%q) = %q, want %q", host, got, want)
		}
	}
}

// hopH2Scheme serves HTTP/2 with prior knowledge on loopback, answers
// each request 200 and reports its :scheme.
func hopH2Scheme(t *testing.T) (addr string, schemes <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan string, 8)
	done := make(chan struct{})
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		<-done
	})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		defer wg.Wait()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				hopServeH2(c, ch)
			}()
		}
	}()
	return ln.Addr().String(), ch
}

func hopServeH2(c net.Conn, schemes chan<- string) {
	if _, err := io.ReadFull(c, make([]byte, len(http2.ClientPreface))); err != nil {
		return
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if fr.WriteSettings() != nil {
		return
	}
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() && fr.WriteSettingsAck() != nil {
				return
			}
		case *http2.MetaHeadersFrame:
			schemes <- f.PseudoValue("scheme")
			buf.Reset()
			_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, BlockFragment: buf.Bytes(), EndHeaders: true, EndStream: true}) != nil {
				return
			}
		}
	}
}

// TestShadowScheme: a shadow to an HTTP/2 cluster keeps the request's
// :scheme https; one without a scheme goes as http.
func TestShadowScheme(t *testing.T) {
	addr, schemes := hopH2Scheme(t)
	a, err := anypb.New(&upstreamhttp.HttpProtocolOptions{UpstreamProtocolOptions: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_{
		ExplicitHttpConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}}}}})
	if err != nil {
		t.Fatal(err)
	}
	c := hopStaticCluster("mirror", addr)
	c.TypedExtensionProtocolOptions = map[string]*anypb.Any{cluster.HTTPProtocolOptionsKey: a}
	cm, _ := hopManager(t, c)
	sh := NewShadowing(slog.New(slog.DiscardHandler), cm)
	t.Cleanup(sh.Close)
	for _, c := range []struct{ in, want string }{{"https", "https"}, {"", "http"}, {"http", "http"}} {
		u := hopURL(t, "/s")
		u.Scheme = c.in
		sh.MirrorStream(hopToMirror, &http.Request{Method: "GET", URL: u, Host: "svc", Header: http.Header{}})
		select {
		case got := <-schemes:
			if got != c.want {
				t.Errorf("scheme %q: the shadow's :scheme is %q, want %q", c.in, got, c.want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("scheme %q: no shadow arrived", c.in)
		}
	}
}
