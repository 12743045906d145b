package xds

import (
	"strings"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestConfigDumpRedactsPrivateKeys: a Gateway credential's private key
// never appears in /debug/config_dump (Envoy's admin shows
// "[redacted]"); its certificate and other types are dumped as they are.
func TestConfigDumpRedactsPrivateKeys(t *testing.T) {
	inline := func(s string) *core.DataSource {
		return &core.DataSource{Specifier: &core.DataSource_InlineBytes{InlineBytes: []byte(s)}}
	}
	sec, err := anypb.New(&tlsv3.Secret{Name: "kubernetes://cred", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inline("CERTIFICATE PEM"), PrivateKey: inline("PRIVATE KEY PEM")}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := protojson.Marshal(redactSecret(sec))
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if strings.Contains(got, "UFJJVkFURSBLRVkgUEVN") || !strings.Contains(got, "[redacted]") || !strings.Contains(got, "kubernetes://cred") {
		t.Errorf("dump %s: want the key redacted, the name kept", got)
	}
	if !strings.Contains(got, "Q0VSVElGSUNBVEUgUEVN") { // base64 of the certificate
		t.Errorf("dump %s lost the certificate", got)
	}
	l, err := anypb.New(&listener.Listener{Name: "l"})
	if err != nil {
		t.Fatal(err)
	}
	if redactSecret(l) != l {
		t.Error("a listener was rewritten")
	}
}
