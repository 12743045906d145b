package hcm

import (
	"net/http"
	"testing"

	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// Both codecs' header maps count their size as the Range walk would
// (Envoy's HeaderMap::byteSize, istio_request_bytes), hop fields left out.
func TestHeaderMapByteSize(t *testing.T) {
	hs := http1.Headers{
		{Name: []byte("Host"), Value: []byte("echo")},
		{Name: []byte("Connection"), Value: []byte("keep-alive"), Hop: true},
		{Name: []byte("x-a"), Value: []byte("12345")},
	}
	maps := map[string]httpfilter.HeaderMap{
		"http1": &h1HeaderMap{hs: &hs},
		"http":  httpfilter.HTTPHeader(http.Header{"Host": {"echo"}, "X-A": {"12345", "6"}}),
	}
	want := map[string]int64{"http1": 4 + 4 + 3 + 5, "http": 4 + 4 + 3 + 5 + 3 + 1}
	for name, m := range maps {
		var walked int64
		m.Range(func(k, v string) bool { walked += int64(len(k) + len(v)); return true })
		got := m.(httpfilter.ByteSizer).ByteSize()
		if got != want[name] || got != walked {
			t.Errorf("%s: ByteSize %d, Range %d, want %d", name, got, walked, want[name])
		}
	}
}
