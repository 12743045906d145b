package hcm

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The differential fuzz test sends the same request, answered by the same
// backend response, through strait-proxy and through net/http's
// httputil.ReverseProxy, and fails when
//   - one forwards a request the other refuses (except the differences
//     allowedDifference documents),
//   - both forward it but the backend receives different requests, or
//   - a later client, on a new connection, receives anything but its own
//     response (a response reaching the wrong client).
//
//	go test -run '^$' -fuzz FuzzDifferential -fuzztime 5m ./internal/proxy/hcm/

// diffCase is one generated exchange.
type diffCase struct {
	req        []byte
	incomplete bool // the request body is cut short: the client gives up
	resp       []byte
	respClose  bool // the backend closes after the response
}

var (
	fuzzMethods  = []string{"GET", "POST", "PUT", "HEAD", "DELETE", "OPTIONS", "PATCH", "TRACE", "G<T", "get"}
	fuzzVersions = []string{"HTTP/1.1", "HTTP/1.0", "HTTP/1.2", "HTTP/2.0", "http/1.1", ""}
)

// genCase builds an exchange from fuzz input: a request (method, target,
// header lines, body and its framing) and a backend response (status,
// header lines, body and its framing). Header text is used as is, so
// invalid fields (and smuggling attempts) come out of it too.
func genCase(sel uint16, target, hdrs, body string, status uint16, respHdrs, respBody string) diffCase {
	var dc diffCase
	method := fuzzMethods[int(sel)%len(fuzzMethods)]
	version := fuzzVersions[int(sel>>4)%len(fuzzVersions)]
	framing := int(sel>>8) % 6
	respFraming := int(sel>>11) % 5
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s %s\r\n", method, target, version)
	for _, l := range strings.Split(hdrs, "\n") {
		if l != "" {
			b.WriteString(l)
			b.WriteString("\r\n")
		}
	}
	switch framing {
	case 0: // no body
		b.WriteString("\r\n")
	case 1: // Content-Length
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(body), body)
	case 2: // chunked
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		if body != "" {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(body), body)
		}
		b.WriteString("0\r\n\r\n")
	case 3: // Content-Length longer than the body: the client gives up
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(body)+10, body)
		dc.incomplete = true
	case 4: // a bad chunk size
		fmt.Fprintf(&b, "Transfer-Encoding: chunked\r\n\r\n%s\r\n%s\r\n0\r\n\r\n", []string{" 5", "-5", "0x5", "123456789abcdef012"}[len(body)%4], body)
		dc.incomplete = true
	case 5: // both: a smuggling attempt
		fmt.Fprintf(&b, "Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", len(body))
	}
	dc.req = b.Bytes()

	var r bytes.Buffer
	code := 100 + int(status)%500
	if code < 200 {
		// An interim response, then the final one.
		fmt.Fprintf(&r, "HTTP/1.1 %d X\r\n\r\n", code)
		code = 200
	}
	fmt.Fprintf(&r, "HTTP/1.1 %d X\r\n", code)
	for _, l := range strings.Split(respHdrs, "\n") {
		if l != "" {
			r.WriteString(l)
			r.WriteString("\r\n")
		}
	}
	switch respFraming {
	case 0:
		fmt.Fprintf(&r, "Content-Length: %d\r\n\r\n%s", len(respBody), respBody)
	case 1:
		r.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		if respBody != "" {
			fmt.Fprintf(&r, "%x\r\n%s\r\n", len(respBody), respBody)
		}
		r.WriteString("0\r\n\r\n")
	case 2: // close-delimited
		r.WriteString("\r\n" + respBody)
		dc.respClose = true
	case 3: // the late second response of the issue
		fmt.Fprintf(&r, "Content-Length: %d\r\n\r\n%sHTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nPWNED!", len(respBody), respBody)
	case 4: // truncated
		fmt.Fprintf(&r, "Content-Length: %d\r\n\r\n%s", len(respBody)+5, respBody)
		dc.respClose = true
	}
	dc.resp = r.Bytes()
	return dc
}

// seen is what a backend received.
type seen struct {
	method, uri, host string
	body              string
	bodyErr           bool
}

// diffBackend answers /probe/N with its path and anything else with the
// current case's response, recording what it receives.
type diffBackend struct {
	ln   net.Listener
	mu   sync.Mutex
	cur  diffCase
	got  []seen
	wg   sync.WaitGroup
	open sync.Map
}

func newDiffBackend(t testing.TB) *diffBackend {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &diffBackend{ln: ln}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.open.Store(c, true)
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				defer b.open.Delete(c)
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					c.SetReadDeadline(time.Now().Add(30 * time.Second))
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					body, berr := io.ReadAll(req.Body)
					if strings.HasPrefix(req.URL.Path, "/probe/") {
						fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(req.URL.Path), req.URL.Path)
						continue
					}
					b.mu.Lock()
					b.got = append(b.got, seen{req.Method, req.RequestURI, req.Host, string(body), berr != nil})
					cur := b.cur
					b.mu.Unlock()
					if berr != nil {
						return
					}
					_, _ = c.Write(cur.resp) // a failed write shows in what the test reads back
					if cur.respClose {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		b.open.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		b.wg.Wait()
	})
	return b
}

func (b *diffBackend) start(dc diffCase) {
	b.mu.Lock()
	b.cur, b.got = dc, nil
	b.mu.Unlock()
}

func (b *diffBackend) received() []seen {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]seen(nil), b.got...)
}

// startReverseProxy runs net/http's ReverseProxy in front of beAddr.
func startReverseProxy(t testing.TB, beAddr string) string {
	u, _ := url.Parse("http://" + beAddr)
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host
		},
		// No upstream keep-alive for the reference: net/http's pool can
		// hand a late response to the next request (a race in its idle
		// check), which would poison the cases after it. Only strait's
		// pooling is under test.
		Transport: &http.Transport{DisableCompression: true, DisableKeepAlives: true},
		ErrorLog:  nil,
	}
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) { w.WriteHeader(http.StatusBadGateway) }
	srv := &http.Server{Handler: rp, MaxHeaderBytes: 60 << 10, ErrorLog: discardLog()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// clientResult is what a client got for one case.
type clientResult struct {
	status int // 0: no response
	body   string
}

// send writes dc.req to addr and reads one response.
func send(addr string, dc diffCase) clientResult {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return clientResult{}
	}
	defer c.Close()
	_, _ = c.Write(dc.req) // a failed write shows in what the test reads back
	wait := 2 * time.Second
	if dc.incomplete {
		wait = 150 * time.Millisecond
	}
	c.SetReadDeadline(time.Now().Add(wait))
	br := bufio.NewReader(c)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return clientResult{}
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != 101 {
			// Interim responses: whether one is relayed differs (we send
			// none to HTTP/1.0 clients, RFC 9110 §15.2; ReverseProxy
			// does); the final response is compared.
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		return clientResult{resp.StatusCode, string(body)}
	}
}

// probe checks that a new client gets its own response.
func probe(addr string, n int64) error {
	path := "/probe/" + strconv.FormatInt(n, 10)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: probe\r\n\r\n", path)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return fmt.Errorf("probe %s: %w", path, err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != path {
		return fmt.Errorf("probe %s got %d %q: another client's response", path, resp.StatusCode, body)
	}
	return nil
}

// allowedDifference says why strait-proxy and ReverseProxy may disagree on
// forwarding this request, or "" when they must not. Each difference is a
// deliberate choice of ours (Envoy's behaviour, or stricter parsing where
// net/http is lenient in a way a proxy should not be).
func allowedDifference(dc diffCase) string {
	head, _, _ := bytes.Cut(dc.req, []byte("\r\n\r\n"))
	line, fields, _ := bytes.Cut(head, []byte("\r\n"))
	lower := strings.ToLower(string(fields))
	switch {
	case dc.incomplete:
		// The client gives up mid-body: strait sends the head upstream at
		// once (as Envoy does) and then aborts it; net/http's Transport
		// writes the head only with the body. What matters, that the
		// upstream request is aborted, is checked separately.
		return "incomplete body"
	case !bytes.HasSuffix(line, []byte(" HTTP/1.1")) && !bytes.HasSuffix(line, []byte(" HTTP/1.0")):
		// net/http takes HTTP/1.2 (or lower case "http/1.1") as 1.1; we
		// answer 400 to anything but HTTP/1.0 and HTTP/1.1.
		return "HTTP version"
	case bytes.HasSuffix(line, []byte(" HTTP/1.0")) && strings.Contains(lower, "transfer-encoding"):
		// Transfer-Encoding did not exist in HTTP/1.0: such a request is
		// faulty framing (RFC 9112 §6.1), refused with 400; net/http
		// decodes it.
		return "Transfer-Encoding in HTTP/1.0"
	case strings.Contains(lower, "content-length") && strings.Contains(lower, "transfer-encoding"):
		// net/http drops Content-Length and forwards; we refuse the
		// request (RFC 9112 §6.3: a smuggling vector), as Envoy does by
		// default (allow_chunked_length false).
		return "Content-Length with Transfer-Encoding"
	case !validTargetForm(line):
		// A target in no form a proxy routes (not origin-form "/...",
		// absolute-form "http://..." nor "*"): 400, as Envoy answers;
		// net/http takes anything url.ParseRequestURI accepts ("A:").
		return "request-target form"
	case bytes.Contains(line, []byte(" * ")):
		// The asterisk form: routed by path as Envoy does (no route
		// matches "*": 404 NR); net/http forwards it.
		return "asterisk-form target"
	case bytes.HasPrefix(line, []byte("OPTIONS")) || bytes.HasPrefix(line, []byte("TRACE")):
		// net/http answers "OPTIONS *" itself; Envoy and we route it.
		return "OPTIONS * / TRACE"
	case strings.Contains(lower, "upgrade") || strings.Contains(lower, "connection"):
		// Upgrade handling (and what Connection may name) differs:
		// ReverseProxy switches protocols itself; Upgrade is not ours here.
		return "Connection/Upgrade"
	case strings.Contains(lower, "expect"):
		// net/http rejects unknown expectations with 417; Envoy forwards them.
		return "Expect"
	case bytes.Contains(head, []byte("\r\n ")) || bytes.Contains(head, []byte("\r\n\t")):
		return "obs-fold (both refuse, with different errors)"
	case hostHasAt(lower):
		// An HTTP/1.1 Host may carry userinfo ("user@host"): Envoy's
		// check_authority_h1_h2 (source/common/http/header_utility.cc)
		// permits "@" and forwards it, as we do; net/http's
		// httpguts.ValidHostHeader refuses it with 400.
		return "@ in Host"
	}
	return ""
}

// hostHasAt reports whether a Host field among the lower-cased header
// lines holds an "@".
func hostHasAt(lower string) bool {
	for _, l := range strings.Split(lower, "\r\n") {
		if v, ok := strings.CutPrefix(l, "host:"); ok && strings.Contains(v, "@") {
			return true
		}
	}
	return false
}

// validTargetForm reports whether the request line's target is in origin,
// absolute (http/https) or asterisk form.
func validTargetForm(line []byte) bool {
	f := bytes.Fields(line)
	if len(f) < 2 {
		return true // not a request line at all: both refuse
	}
	t := strings.ToLower(string(f[1]))
	for _, scheme := range []string{"http://", "https://"} {
		if rest, ok := strings.CutPrefix(t, scheme); ok {
			// An http URI with an empty host is invalid (RFC 9110 §4.2.1),
			// and an authority holds only authority characters; net/http
			// checks neither in the target (it does in a Host header).
			auth, _, _ := strings.Cut(rest, "/")
			auth, _, _ = strings.Cut(auth, "?")
			if strings.Trim(auth, "abcdefghijklmnopqrstuvwxyz0123456789!$%&'()*+,-.:;=@[]_~") != "" {
				return false
			}
			if i := strings.LastIndexByte(auth, '@'); i >= 0 {
				auth = auth[i+1:]
			}
			return auth != ""
		}
	}
	return strings.HasPrefix(t, "/") || t == "*"
}

// decodedURI is a request-target with its path percent-decoded.
func decodedURI(u string) string {
	x, err := url.ParseRequestURI(u)
	if err != nil {
		return u
	}
	return x.Path + "?" + x.RawQuery
}

// allowedResponseDifference says why the clients may get different
// statuses for the same backend response, or "".
func allowedResponseDifference(dc diffCase, strait, rp clientResult) string {
	switch {
	case dc.incomplete:
		// A body with bad framing is the client's fault: 400, as Envoy
		// answers; ReverseProxy reports every body error as 502.
		return "bad request body"
	}
	return ""
}

func discardLog() *logLogger { return newDiscardLogger() }

func FuzzDifferential(f *testing.F) {
	seeds := []struct {
		sel                uint16
		target, hdrs, body string
		status             uint16
		respHdrs, respBody string
	}{
		{0, "/", "Host: h", "", 100, "X-A: 1", "hello"},
		{1 | 1<<8, "/up", "Host: h", "abc", 100, "", "ok"},
		{1 | 2<<8 | 1<<11, "/c", "Host: h", "chunked body", 100, "", "chunky"},
		{1 | 3<<8, "/short", "Host: h", "abc", 100, "", "x"},
		{1 | 4<<8, "/bad", "Host: h", "hello", 100, "", "x"},
		{1 | 5<<8, "/smuggle", "Host: h", "abc", 100, "", "x"},
		{0 | 3<<11, "/late", "Host: h", "", 104, "", ""},
		{0 | 2<<11, "/close", "Host: h", "", 100, "", "until close"},
		{0 | 4<<11, "/trunc", "Host: h", "", 100, "", "cut"},
		{0, "/dup", "Host: h", "", 100, "Content-Length: 3", "abc"},
		{0, "/", "Host: h\nHost: i", "", 100, "", ""},
		{0, "/", "Host: h\nX: a\x00b", "", 100, "", ""},
		{0, "http://user:pw@example.com/x", "Host: example.com", "", 100, "", ""},
		{0, "/", "Host: h\nConnection: Host", "", 100, "", ""},
		{0 | 1<<4, "/", "", "", 100, "", "1.0"},
		{0 | 5<<4, "/", "", "", 100, "", "0.9"},
		{0, "/", "Host: h\nX-Bad Name: 1", "", 100, "Bad Header", ""},
		{0, "/", "Host: h", "", 204, "", "body after 204"},
	}
	for _, s := range seeds {
		f.Add(s.sel, s.target, s.hdrs, s.body, s.status, s.respHdrs, s.respBody)
	}
	beS, beR := newDiffBackend(f), newDiffBackend(f)
	strait := startStrait(f, beS.ln.Addr().String(), proxyConfig{})
	rp := startReverseProxy(f, beR.ln.Addr().String())
	var probes atomic.Int64
	f.Fuzz(func(t *testing.T, sel uint16, target, hdrs, body string, status uint16, respHdrs, respBody string) {
		if len(target) == 0 || len(target) > 200 || len(hdrs) > 2000 || len(body) > 4000 || len(respHdrs) > 2000 || len(respBody) > 4000 {
			t.Skip() // testreq:ok, an input out of the fuzzed range
		}
		dc := genCase(sel, target, hdrs, body, status, respHdrs, respBody)
		beS.start(dc)
		beR.start(dc)
		rs := send(strait, dc)
		rr := send(rp, dc)
		gs, gr := beS.received(), beR.received()
		if why := allowedDifference(dc); why == "" {
			if (len(gs) > 0) != (len(gr) > 0) {
				t.Fatalf("forwarded by strait: %v (client got %d), by ReverseProxy: %v (client got %d)\nrequest %q",
					len(gs) > 0, rs.status, len(gr) > 0, rr.status, dc.req)
			}
			if len(gs) > 0 && len(gr) > 0 && !gs[0].bodyErr && !gr[0].bodyErr {
				a, b := gs[0], gr[0]
				// ReverseProxy re-encodes the path (" becomes %22); we
				// forward it as received, as Envoy does: compare decoded.
				if a.method != b.method || decodedURI(a.uri) != decodedURI(b.uri) || a.body != b.body {
					t.Fatalf("the backend received %+v through strait, %+v through ReverseProxy\nrequest %q", a, b, dc.req)
				}
			}
		}
		if dc.incomplete && len(gs) > 0 {
			// The client gave up mid-body: the upstream request must be
			// aborted, not left waiting for the rest.
			if !waitFor(func() bool { r := beS.received(); return len(r) > 0 && r[0].bodyErr }) {
				t.Fatalf("strait left the upstream request open after the client gave up\nrequest %q", dc.req)
			}
		}
		if len(gs) > 0 && len(gr) > 0 && rs.status != 0 && rr.status != 0 && rs.status != rr.status {
			if why := allowedResponseDifference(dc, rs, rr); why == "" {
				t.Fatalf("client got %d through strait, %d through ReverseProxy\nrequest %q\nresponse %q", rs.status, rr.status, dc.req, dc.resp)
			}
		}
		if err := probe(strait, probes.Add(1)); err != nil {
			t.Fatalf("strait: %v\nrequest %q\nresponse %q", err, dc.req, dc.resp)
		}
		// The reference is probed too; its failures are net/http's, not
		// ours, so they are logged, not failed.
		if err := probe(rp, probes.Add(1)); err != nil {
			t.Logf("ReverseProxy (reference): %v\nrequest %q\nresponse %q", err, dc.req, dc.resp)
		}
	})
}

type logLogger = log.Logger

func newDiscardLogger() *log.Logger { return log.New(io.Discard, "", 0) }
