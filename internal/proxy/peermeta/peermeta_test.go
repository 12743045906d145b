package peermeta

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	udpav1 "github.com/cncf/xds/go/udpa/type/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s:\n got %s\nwant %s", name, got, want)
	}
}

var productpage = Workload{
	Instance: "productpage-v1-84975bc778-pxz2w", Namespace: "default", Workload: "productpage-v1",
	Cluster: "client-cluster", CanonicalService: "productpage-v1", CanonicalRevision: "version-1",
	App: "productpage", Version: "v1", Type: TypeDeployment,
}

// The header istio/proxy's own peer_metadata tests send (a full node
// metadata struct of an Istio sidecar, base64 without padding) decodes to
// the workload Istio reads from it.
func TestDecodeIstioHeader(t *testing.T) {
	raw, err := os.ReadFile("testdata/istio_header.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeHeader(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if got != productpage {
		t.Errorf("got %+v\nwant %+v", got, productpage)
	}
	if o := got.Owner(); o != "kubernetes://apis/apps/v1/namespaces/default/deployments/productpage-v1" {
		t.Errorf("owner %q", o)
	}
}

func TestEncodeHeaderGolden(t *testing.T) {
	v, err := EncodeHeader(productpage)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "productpage_header.golden", v+"\n")
	// With and without padding, it reads back as written.
	for _, s := range []string{v, strings.TrimRight(v, "=")} {
		got, err := DecodeHeader(s)
		if err != nil || got != productpage {
			t.Errorf("round trip %q: %+v, %v", s, got, err)
		}
	}
}

func TestFromStructQualifiedLabels(t *testing.T) {
	s, err := structpb.NewStruct(map[string]any{
		"NAMESPACE": "ns", "WORKLOAD_NAME": "w", "OWNER": "kubernetes://apis/apps/v1/namespaces/ns/cronjobs/w",
		"LABELS": map[string]any{"app": "a", "app.kubernetes.io/name": "qa", "version": "v", "app.kubernetes.io/version": "qv"},
	})
	if err != nil {
		t.Fatal(err)
	}
	w := FromStruct(s)
	if w.App != "qa" || w.Version != "qv" || w.Type != TypeCronJob {
		t.Errorf("got %+v", w)
	}
}

func TestDecodeHeaderRefuses(t *testing.T) {
	for name, v := range map[string]string{
		"not base64":   "!!!",
		"not a struct": "/////w",
		"too large":    strings.Repeat("A", MaxEncodedLen+1),
		"too deep":     deepStruct(64),
	} {
		if _, err := DecodeHeader(v); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func deepStruct(depth int) string {
	s := &structpb.Struct{}
	for range depth {
		s = &structpb.Struct{Fields: map[string]*structpb.Value{"x": structpb.NewStructValue(s)}}
	}
	b, _ := proto.Marshal(s)
	return encodeRaw(b)
}

// A frame built here by hand from the format (magic, length, Any(Struct))
// parses; ours matches the golden bytes and parses back.
func TestExchange(t *testing.T) {
	inner, _ := structpb.NewStruct(map[string]any{
		"x-envoy-peer-metadata-id": "sidecar~10.0.0.2~ratings-v1-1.default~default.svc.cluster.local",
		"x-envoy-peer-metadata": map[string]any{
			"NAMESPACE": "default", "WORKLOAD_NAME": "ratings-v1", "CLUSTER_ID": "server-cluster",
			"LABELS": map[string]any{"service.istio.io/canonical-name": "ratings", "service.istio.io/canonical-revision": "version-1", "app": "ratings", "version": "v1"},
		},
	})
	a, _ := anypb.New(inner)
	body, _ := proto.Marshal(a)
	frame := binary.BigEndian.AppendUint32([]byte{0x3d, 0x23, 0x04, 0x67}, uint32(len(body)))
	frame = append(append(frame, body...), "app bytes"...)
	id, w, n, err := ParseExchange(frame)
	if err != nil {
		t.Fatal(err)
	}
	if string(frame[n:]) != "app bytes" || id != "sidecar~10.0.0.2~ratings-v1-1.default~default.svc.cluster.local" ||
		w.Workload != "ratings-v1" || w.CanonicalService != "ratings" || w.Cluster != "server-cluster" || w.Version != "v1" {
		t.Errorf("got %q %+v rest %q", id, w, frame[n:])
	}
	for i := range n {
		if _, _, _, err := ParseExchange(frame[:i]); !errors.Is(err, ErrShort) {
			t.Fatalf("prefix %d: %v, want ErrShort", i, err)
		}
	}

	ours, err := AppendExchange(nil, "productpage-id", productpage)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "productpage_exchange.golden", hex.EncodeToString(ours)+"\n")
	id, w, n, err = ParseExchange(ours)
	if err != nil || id != "productpage-id" || w != productpage || n != len(ours) {
		t.Errorf("round trip: %q %+v %d %v", id, w, n, err)
	}
}

func TestExchangeRefuses(t *testing.T) {
	big := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, Magic), MaxExchangeLen+1)
	if _, _, _, err := ParseExchange(big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized: %v", err)
	}
	if _, _, _, err := ParseExchange([]byte("GET / HTTP/1.1\r\n")); !errors.Is(err, ErrNoExchange) {
		t.Errorf("plain bytes: %v", err)
	}
	if _, _, _, err := ParseExchange([]byte{0x3d, 0x00}); !errors.Is(err, ErrNoExchange) {
		t.Errorf("wrong magic prefix: %v", err)
	}
	wrongType, _ := proto.Marshal(&anypb.Any{TypeUrl: "type.googleapis.com/google.protobuf.Empty"})
	f := append(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, Magic), uint32(len(wrongType))), wrongType...)
	if _, _, _, err := ParseExchange(f); err == nil {
		t.Error("wrong type_url accepted")
	}
}

func encodeRaw(b []byte) string { return strings.TrimRight(b64(b), "=") }

func TestParseNetworkConfig(t *testing.T) {
	mk := func(typeURL string, fields map[string]any) *anypb.Any {
		v, _ := structpb.NewStruct(fields)
		a, _ := anypb.New(&udpav1.TypedStruct{TypeUrl: typeURL, Value: v})
		return a
	}
	// Istio's TCPListenerMx / TCPClusterMx.
	if err := ParseNetworkConfig(mk(NetworkTypeURL, map[string]any{"protocol": "istio-peer-exchange", "enable_discovery": true})); err != nil {
		t.Errorf("Istio's config: %v", err)
	}
	for name, a := range map[string]*anypb.Any{
		"other protocol": mk(NetworkTypeURL, map[string]any{"protocol": "mx-protocol"}),
		"no protocol":    mk(NetworkTypeURL, map[string]any{}),
		"unknown field":  mk(NetworkTypeURL, map[string]any{"protocol": "istio-peer-exchange", "x": 1}),
		"labels":         mk(NetworkTypeURL, map[string]any{"protocol": "istio-peer-exchange", "additional_labels": []any{"a"}}),
		"other type":     mk("type.googleapis.com/x", map[string]any{"protocol": "istio-peer-exchange"}),
	} {
		if err := ParseNetworkConfig(a); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
