package gen

import (
	"testing"
)

func TestDefaultEndpoint(t *testing.T) {
	for ep, want := range map[string]string{
		"127.0.0.1:8080": "127.0.0.1:8080",
		"[::1]:8080":     "[::1]:8080",
		"0.0.0.0:8080":   "10.1.2.3:8080",
		"":               "invalid AddrPort",
		"127.0.0.1":      "invalid AddrPort",
		"127.0.0.1:0":    "invalid AddrPort",
		"127.0.0.1:x":    "invalid AddrPort",
		"10.0.0.9:8080":  "invalid AddrPort",
		"unix:///a.sock": "invalid AddrPort",
	} {
		if got := defaultEndpoint(ep, "10.1.2.3").String(); got != want {
			t.Errorf("defaultEndpoint(%q) = %s, want %s", ep, got, want)
		}
	}
	if got := defaultEndpoint("0.0.0.0:8080", ""); got.IsValid() {
		t.Errorf("0.0.0.0 without a proxy address = %s, want invalid", got)
	}
}
