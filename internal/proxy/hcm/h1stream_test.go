package hcm

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/straitmesh/strait/internal/proxy/filters/http/registry"
	routerfilter "github.com/straitmesh/strait/internal/proxy/filters/http/router"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// TestH1StreamInfoUpstreamHostPerRequest: the HTTP/1.1 stream keeps the
// last upstream address it parsed, and each request's StreamInfo still
// names the endpoint that served that request: on one connection whose
// requests the round robin sends to two backends in turn, with a
// request that reaches no upstream (no route) between them.
func TestH1StreamInfoUpstreamHostPerRequest(t *testing.T) {
	var mu sync.Mutex
	var infos []httpfilter.StreamInfo
	reg, err := registry.New(infoFactory{&mu, &infos}, routerfilter.Factory{})
	if err != nil {
		t.Fatal(err)
	}
	var bes []string
	for range 2 {
		be := httptest.NewUnstartedServer(nil)
		addr := be.Listener.Addr().String()
		be.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, addr) // a handler's write fails only when the client has gone
		})
		be.Start()
		t.Cleanup(be.Close)
		bes = append(bes, addr)
	}
	addr := startChainProxy(t, CodecStrait, reg, []string{"test.info"},
		[]*routev3.Route{prefixRoute("/p", "be")}, staticCluster("be", bes...))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	// want is, per request, the upstream it reached ("" for none).
	var want []string
	for _, path := range []string{"/p", "/p", "/none", "/p", "/p", "/p"} {
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: t\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case path == "/none" && resp.StatusCode == http.StatusNotFound:
			want = append(want, "")
		case resp.StatusCode == http.StatusOK:
			want = append(want, string(body))
		default:
			t.Fatalf("%s: %d %q", path, resp.StatusCode, body)
		}
		// Complete runs once the response is out: wait for it, so that
		// the infos are in request order.
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			n := len(infos)
			mu.Unlock()
			if n == len(want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d Completes after %d requests", n, len(want))
			}
			time.Sleep(time.Millisecond)
		}
	}
	if want[0] == want[1] {
		t.Fatalf("the round robin sent both first requests to %s: the test needs two endpoints in turn", want[0])
	}
	mu.Lock()
	defer mu.Unlock()
	for i, in := range infos {
		if w := want[i]; w == "" {
			if in.UpstreamHost.IsValid() {
				t.Errorf("request %d reached no upstream; StreamInfo.UpstreamHost %v", i, in.UpstreamHost)
			}
		} else if in.UpstreamHost != netip.MustParseAddrPort(w) {
			t.Errorf("request %d: StreamInfo.UpstreamHost %v, served by %s", i, in.UpstreamHost, w)
		}
	}
}

// fieldsOf renders hs as "name: value" lines, marking hop fields.
func fieldsOf(hs http1.Headers) []string {
	var out []string
	for _, h := range hs {
		s := string(h.Name) + ": " + string(h.Value)
		if h.Hop {
			s += " (hop)"
		}
		out = append(out, s)
	}
	return out
}

// TestH1HeaderMapTakeFields: the one-pass removal of the exchange's two
// fields returns the first value of each and how many there were, in any
// case of the name, and leaves the other fields in their order (hop
// fields too); SetStaticPair replaces both with one field each.
func TestH1HeaderMapTakeFields(t *testing.T) {
	const a, b = "x-envoy-peer-metadata-id", "x-envoy-peer-metadata"
	for _, tc := range []struct {
		name   string
		in     []string // name, value pairs
		va, vb string
		na, nb int
		left   []string
	}{
		{"none", []string{"host", "h", "x-app", "1"}, "", "", 0, 0, []string{"host: h", "x-app: 1"}},
		{"both", []string{"host", "h", "X-Envoy-Peer-Metadata-Id", "id", "x-envoy-PEER-metadata", "md", "x-app", "1"}, "id", "md", 1, 1, []string{"host: h", "x-app: 1"}},
		{"only b, first", []string{b, "md", "host", "h"}, "", "md", 0, 1, []string{"host: h"}},
		{"last", []string{"host", "h", "x-app", "1", a, "id", b, "md"}, "id", "md", 1, 1, []string{"host: h", "x-app: 1"}},
		{"same lengths, other names", []string{"x-envoy-peer-metadata-ix", "1", "x-envoy-peer-metadatb", "2"}, "", "", 0, 0, []string{"x-envoy-peer-metadata-ix: 1", "x-envoy-peer-metadatb: 2"}},
		{"twice each", []string{a, "1", b, "m1", "x", "y", a, "2", b, "m2"}, "1", "m1", 2, 2, []string{"x: y"}},
		{"prefix names stay", []string{"x-envoy-peer-metadata-idx", "p", "x-envoy-peer-metadat", "q"}, "", "", 0, 0, []string{"x-envoy-peer-metadata-idx: p", "x-envoy-peer-metadat: q"}},
		{"empty value", []string{b, "", "connection", "close"}, "", "", 0, 1, []string{"connection: close (hop)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hs http1.Headers
			for i := 0; i < len(tc.in); i += 2 {
				hs = append(hs, http1.Header{Name: []byte(tc.in[i]), Value: []byte(tc.in[i+1]), Hop: tc.in[i] == "connection"})
			}
			m := h1HeaderMap{hs: &hs}
			va, na, vb, nb := m.TakeFields(a, b)
			if va != tc.va || na != tc.na || vb != tc.vb || nb != tc.nb {
				t.Errorf("TakeFields = %q %d, %q %d; want %q %d, %q %d", va, na, vb, nb, tc.va, tc.na, tc.vb, tc.nb)
			}
			if got := fieldsOf(hs); !slices.Equal(got, tc.left) {
				t.Errorf("left %q, want %q", got, tc.left)
			}
			m.SetStaticPair(a, "ours-id", b, "ours")
			want := append(slices.Clone(tc.left), a+": ours-id", b+": ours")
			if got := fieldsOf(hs); !slices.Equal(got, want) {
				t.Errorf("after SetStaticPair %q, want %q", got, want)
			}
		})
	}
}
