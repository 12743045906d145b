package peermeta

import (
	"encoding/base64"
	"errors"
	"os"
	"strings"
	"testing"
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// Hostile peers: whatever bytes arrive, the decoders neither panic nor
// read past what they were given, and a frame they accept is no longer
// than the input and within the bound.
func FuzzParseExchange(f *testing.F) {
	ours, _ := AppendExchange(nil, "id", productpage)
	f.Add(ours)
	f.Add([]byte{0x3d, 0x23, 0x04, 0x67, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, n, err := ParseExchange(b)
		if err == nil && (n > len(b) || n > HeaderLen+MaxExchangeLen) {
			t.Fatalf("consumed %d of %d", n, len(b))
		}
		if err != nil && n != 0 {
			t.Fatalf("error %v with n=%d", err, n)
		}
		_ = errors.Is(err, ErrShort)
	})
}

func FuzzDecodeHeader(f *testing.F) {
	raw, _ := os.ReadFile("testdata/istio_header.txt")
	f.Add(strings.TrimSpace(string(raw)))
	v, _ := EncodeHeader(productpage)
	f.Add(v)
	f.Add("====")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = DecodeHeader(s)
	})
}
