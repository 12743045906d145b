package client

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strings"
	"testing"

	"golang.org/x/net/http2"
)

// echoHandler answers what it received, in a form both clients must
// deliver alike: status and headers chosen by the request, the request's
// method, path, header fields and body echoed in the body, and trailers.
func echoHandler(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(599)
		return
	}
	var names []string
	for k := range r.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s\n", r.Method, r.URL.RequestURI())
	for _, k := range names {
		fmt.Fprintf(&b, "%s: %q\n", k, r.Header[k])
	}
	fmt.Fprintf(&b, "body %d %x\n", len(body), body[:min(len(body), 32)])
	w.Header().Set("Trailer", "X-Echo-Trailer")
	for i := range len(r.Header.Get("X-Resp-Headers")) {
		w.Header().Add(fmt.Sprintf("X-R%d", i%3), strings.Repeat("v", i))
	}
	status := 200
	if r.Header.Get("X-Status") != "" {
		_, _ = fmt.Sscan(r.Header.Get("X-Status"), &status)
	}
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
	if n := len(body); n > 0 {
		_, _ = w.Write(bytes.Repeat([]byte{'z'}, n))
	}
	w.Header().Set("X-Echo-Trailer", fmt.Sprint(len(body)))
	w.Header().Set(http.TrailerPrefix+"Grpc-Message", r.Trailer.Get("X-Req-Trailer"))
}

// TestDifferentialXNetTransport sends the same random requests through
// this client and through x/net/http2's Transport to x/net/http2's
// server, and wants the same responses (status, header, body, trailers).
func TestDifferentialXNetTransport(t *testing.T) {
	addr := xnetServer(t, http.HandlerFunc(echoHandler), nil)
	ours := dial(t, addr, Config{StreamWindow: 1 << 16, ConnWindow: 1 << 16})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := (&http2.Transport{AllowHTTP: true, DisableCompression: true}).NewClientConn(nc)
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Close()

	rng := rand.New(rand.NewPCG(24, 1))
	methods := []string{"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"}
	for i := range 300 {
		method := methods[rng.IntN(len(methods))]
		path := fmt.Sprintf("/p%d/%s?q=%d", i, strings.Repeat("a", rng.IntN(40)), rng.IntN(1000))
		var bodyBytes []byte
		if method != "GET" && method != "HEAD" && rng.IntN(2) == 0 {
			bodyBytes = make([]byte, rng.IntN(200<<10))
			for j := range bodyBytes {
				bodyBytes[j] = byte(rng.IntN(256))
			}
		}
		hdr := http.Header{}
		for range rng.IntN(8) {
			hdr.Add(fmt.Sprintf("X-H%d", rng.IntN(5)), strings.Repeat("h", rng.IntN(100)))
		}
		if rng.IntN(4) == 0 {
			hdr.Set("X-Status", fmt.Sprint([]int{201, 204, 304, 404, 500, 503}[rng.IntN(6)]))
		}
		hdr.Set("X-Resp-Headers", strings.Repeat("r", rng.IntN(10)))
		hdr.Set("User-Agent", "diff") // x/net would add its own
		hdr.Set("X-Request-Id", fmt.Sprintf("%016x", rng.Uint64()))
		withTrailer := len(bodyBytes) > 0 && rng.IntN(2) == 0
		mk := func() *http.Request {
			var body io.Reader
			if len(bodyBytes) > 0 {
				body = bytes.NewReader(bodyBytes)
			}
			req, err := http.NewRequest(method, "http://backend"+path, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header = hdr.Clone()
			if withTrailer {
				req.ContentLength = -1
				req.Body = io.NopCloser(io.MultiReader(bytes.NewReader(bodyBytes)))
				req.Trailer = http.Header{"X-Req-Trailer": {fmt.Sprint("t", i)}}
			}
			return req
		}
		a, err := ours.RoundTrip(mk())
		if err != nil {
			t.Fatalf("request %d (%s %s): ours: %v", i, method, path, err)
		}
		b, err := theirs.RoundTrip(mk())
		if err != nil {
			t.Fatalf("request %d: x/net: %v", i, err)
		}
		if ga, gb := summary(t, a), summary(t, b); ga != gb {
			t.Fatalf("request %d (%s %s) differs:\nours:  %s\nx/net: %s", i, method, path, ga, gb)
		}
	}
}

// summary reads resp whole and renders what both clients must agree on.
func summary(t *testing.T, resp *http.Response) string {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("body: %v", err)
	}
	h := resp.Header.Clone()
	h.Del("Date")
	tr := resp.Trailer
	if len(tr) == 0 {
		tr = nil
	}
	var hk []string
	for k, v := range h {
		hk = append(hk, fmt.Sprintf("%s=%q", k, v))
	}
	sort.Strings(hk)
	var tk []string
	for k, v := range tr {
		tk = append(tk, fmt.Sprintf("%s=%q", k, v))
	}
	sort.Strings(tk)
	return fmt.Sprintf("%s cl=%d header=%v trailer=%v body=%d:%.200q", resp.Status, resp.ContentLength, hk, tk, len(body), body)
}
