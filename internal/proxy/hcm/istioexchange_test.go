package hcm

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	udpav1 "github.com/cncf/xds/go/udpa/type/v1"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	statspb "istio.io/api/envoy/extensions/stats"

	"github.com/straitmesh/strait/internal/proxy/filters/http/metadataexchange"
	"github.com/straitmesh/strait/internal/proxy/filters/http/registry"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/peermeta"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// The HTTP/1.1 header map takes the exchange's fields in one pass; if it
// stopped implementing these, the filter would fall back to Lookup and
// Del without a test noticing.
var (
	_ metadataexchange.FieldTaker       = (*h1HeaderMap)(nil)
	_ metadataexchange.StaticPairSetter = (*h1HeaderMap)(nil)
)

// TestH1IstioExchange: an inbound sidecar's HTTP/1.1 path with Istio's
// exchange and stats filters, over real sockets. The client sidecar's
// exchange fields (in any case) never reach the app, the response
// carries ours, and the request is counted with the peer they name; a
// request that sends x-envoy-peer-metadata twice (a real peer's value
// and a forged one) names no peer, is stripped of both, and is
// answered; the requests come on one connection, so each is labelled
// from its own fields, not the one before.
func TestH1IstioExchange(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var names []string
		for k := range r.Header {
			names = append(names, strings.ToLower(k))
		}
		slices.Sort(names)
		_, _ = io.WriteString(w, strings.Join(names, ",")) // a handler's write fails only when the client has gone
	}))
	t.Cleanup(be.Close)
	mxv, _ := structpb.NewStruct(map[string]any{
		"downstream_discovery":   []any{map[string]any{"istio_headers": map[string]any{}}},
		"downstream_propagation": []any{map[string]any{"istio_headers": map[string]any{}}},
	})
	mx, _ := anypb.New(&udpav1.TypedStruct{TypeUrl: metadataexchange.TypeURL, Value: mxv})
	sc, _ := anypb.New(&statspb.PluginConfig{DisableHostHeaderFallback: true})
	md, _ := structpb.NewStruct(map[string]any{"NAMESPACE": "bench", "WORKLOAD_NAME": "server"})
	mst := stats.New()
	ch, err := buildChain([]*hcmv3.HttpFilter{
		{Name: metadataexchange.Name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mx}},
		{Name: "istio.stats", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: sc}},
		{Name: routerFilter},
	}, registry.Default(), httpfilter.BuildContext{Stats: mst,
		Node: &corev3.Node{Id: "server-node", Metadata: md}, Direction: corev3.TrafficDirection_INBOUND})
	if err != nil {
		t.Fatal(err)
	}
	p := startProxyFilterWith(t, CodecStrait, strings.TrimPrefix(be.URL, "http://"), slog.New(slog.DiscardHandler), nil, func(f *Filter) { f.chain = ch })
	client, err := peermeta.EncodeHeader(peermeta.Workload{Namespace: "bench", Workload: "client", CanonicalService: "client"})
	if err != nil {
		t.Fatal(err)
	}
	forged, err := peermeta.EncodeHeader(peermeta.Workload{Namespace: "bench", Workload: "forged", CanonicalService: "forged"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i, tc := range []struct {
		name, fields string
		answered     bool // our exchange fields in the response
	}{
		{"exchange", "X-Envoy-Peer-Metadata-Id: client-node\r\nx-envoy-PEER-metadata: " + client + "\r\n", true},
		{"metadata twice", "x-envoy-peer-metadata: " + client + "\r\nx-envoy-peer-metadata: " + forged + "\r\n", true},
		{"none", "", false},
		{"exchange again", "x-envoy-peer-metadata-id: client-node\r\nx-envoy-peer-metadata: " + client + "\r\n", true},
	} {
		if _, err := io.WriteString(c, "GET /p HTTP/1.1\r\nHost: t\r\nX-App: 1\r\n"+tc.fields+"\r\n"); err != nil {
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
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "x-app") {
			t.Fatalf("%d %s: %d %q", i, tc.name, resp.StatusCode, body)
		}
		if strings.Contains(string(body), "x-envoy-peer") {
			t.Errorf("%d %s: the app saw %s", i, tc.name, body)
		}
		if got := resp.Header.Get(peermeta.HeaderMetadata) != ""; got != tc.answered {
			t.Errorf("%d %s: our metadata in the response: %v, want %v", i, tc.name, got, tc.answered)
		}
		if tc.answered && len(resp.Header.Values(peermeta.HeaderMetadata)) != 1 {
			t.Errorf("%d %s: response metadata fields %q", i, tc.name, resp.Header.Values(peermeta.HeaderMetadata))
		}
	}
	// A stream's series are recorded when it completes, which may come
	// a moment after its response reached the client: wait for the
	// counts (a wrong label never becomes right by waiting).
	counts := func() (client, unknown, forged string) {
		var sb strings.Builder
		if err := mst.WritePrometheus(&sb); err != nil {
			t.Fatal(err)
		}
		prom := sb.String()
		count := func(workload string) string {
			for _, l := range strings.Split(prom, "\n") {
				if strings.HasPrefix(l, "istio_requests_total{") && strings.Contains(l, `source_workload="`+workload+`"`) {
					return l[strings.LastIndexByte(l, ' ')+1:]
				}
			}
			return "0"
		}
		return count("client"), count("unknown"), count("forged")
	}
	deadline := time.Now().Add(5 * time.Second)
	cl, unk, forged := counts()
	for (cl != "2" || unk != "2") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		cl, unk, forged = counts()
	}
	if cl != "2" {
		t.Errorf("requests from client %s, want 2", cl)
	}
	if unk != "2" {
		t.Errorf("requests from an unknown peer %s, want 2", unk)
	}
	if forged != "0" {
		t.Errorf("requests from forged %s, want 0", forged)
	}
}
