package fwdheaders

import (
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/url"
	"strings"
	"testing"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/certtest"
)

// TestXFCCApply: each forward_client_cert_details mode on a mutual TLS
// connection and on one without a client certificate, with the client's
// header absent, empty and set.
func TestXFCCApply(t *testing.T) {
	const el = "By=spiffe://s;Hash=ab"
	mtls := XFCCConn{mtls: true, element: el}
	plain := XFCCConn{}
	type in struct {
		v   string
		has bool
	}
	none, empty, sent := in{}, in{"", true}, in{"By=a;Hash=1", true}
	for _, tc := range []struct {
		mode hcmv3.HttpConnectionManager_ForwardClientCertDetails
		c    XFCCConn
		in   in
		want string
		keep bool
	}{
		{hcmv3.HttpConnectionManager_SANITIZE, mtls, sent, "", false},
		{hcmv3.HttpConnectionManager_SANITIZE, mtls, none, "", false},
		{hcmv3.HttpConnectionManager_SANITIZE, plain, sent, "", false},
		{hcmv3.HttpConnectionManager_FORWARD_ONLY, mtls, sent, "By=a;Hash=1", true},
		{hcmv3.HttpConnectionManager_FORWARD_ONLY, mtls, none, "", false},
		{hcmv3.HttpConnectionManager_FORWARD_ONLY, plain, sent, "", false},
		{hcmv3.HttpConnectionManager_APPEND_FORWARD, mtls, sent, "By=a;Hash=1," + el, true},
		{hcmv3.HttpConnectionManager_APPEND_FORWARD, mtls, none, el, true},
		{hcmv3.HttpConnectionManager_APPEND_FORWARD, mtls, empty, el, true},
		{hcmv3.HttpConnectionManager_APPEND_FORWARD, plain, sent, "", false},
		{hcmv3.HttpConnectionManager_SANITIZE_SET, mtls, sent, el, true},
		{hcmv3.HttpConnectionManager_SANITIZE_SET, mtls, none, el, true},
		{hcmv3.HttpConnectionManager_SANITIZE_SET, plain, sent, "", false},
		{hcmv3.HttpConnectionManager_ALWAYS_FORWARD_ONLY, mtls, sent, "By=a;Hash=1", true},
		{hcmv3.HttpConnectionManager_ALWAYS_FORWARD_ONLY, plain, sent, "By=a;Hash=1", true},
		{hcmv3.HttpConnectionManager_ALWAYS_FORWARD_ONLY, plain, none, "", false},
	} {
		name := fmt.Sprintf("%v/mtls=%v/has=%v/%q", tc.mode, tc.c.mtls, tc.in.has, tc.in.v)
		t.Run(name, func(t *testing.T) {
			got, keep := XFCC{mode: tc.mode}.apply(tc.in.v, tc.in.has, tc.c)
			if got != tc.want || keep != tc.keep {
				t.Errorf("apply = %q, %v; want %q, %v", got, keep, tc.want, tc.keep)
			}
		})
	}
}

// TestXFCCElement: this hop's element has By, Hash and the asked details
// in Envoy's order and encoding.
func TestXFCCElement(t *testing.T) {
	c := certtest.Issue(t, "spiffe://td/ns/a/sa/server", &x509.Certificate{
		Subject:  pkix.Name{CommonName: "client", Organization: []string{"Acme, Inc"}},
		URIs:     []*url.URL{certtest.MustURL(t, "spiffe://td/ns/a/sa/client"), certtest.MustURL(t, "https://example.com/x")},
		DNSNames: []string{"a.example", "b.example"},
	})
	sum := sha256.Sum256(c.ClientX.Raw)
	hash := hex.EncodeToString(sum[:])
	peers := []*x509.Certificate{c.ClientX, c.CA}
	all := XFCC{mode: hcmv3.HttpConnectionManager_SANITIZE_SET, cert: true, chain: true, subject: true, uri: true, dns: true}
	got := all.element(c.ServerX, peers)
	parts := strings.Split(got, ";")
	wantKeys := []string{"By", "Hash", "Cert", "Chain", "Subject", "URI", "URI", "DNS", "DNS"}
	if len(parts) != len(wantKeys) {
		t.Fatalf("element %q has %d parts, want %d (%v)", got, len(parts), len(wantKeys), wantKeys)
	}
	for i, k := range wantKeys {
		if !strings.HasPrefix(parts[i], k+"=") {
			t.Errorf("part %d = %q, want key %s", i, parts[i], k)
		}
	}
	for i, want := range map[int]string{
		0: "By=spiffe://td/ns/a/sa/server",
		1: "Hash=" + hash,
		4: `Subject="CN=client,O=Acme\, Inc"`,
		5: "URI=spiffe://td/ns/a/sa/client",
		6: "URI=https://example.com/x",
		7: "DNS=a.example",
		8: "DNS=b.example",
	} {
		if parts[i] != want {
			t.Errorf("part %d = %q, want %q", i, parts[i], want)
		}
	}
	decode := func(v, key string) []*pem.Block {
		t.Helper()
		v, ok := strings.CutPrefix(v, key+`="`)
		v, ok2 := strings.CutSuffix(v, `"`)
		if !ok || !ok2 {
			t.Fatalf("%q is not %s=\"…\"", v, key)
		}
		for _, c := range []string{"\n", " ", "+", "/", "="} {
			if strings.Contains(v, c) {
				t.Errorf("%s has %q unencoded", key, c)
			}
		}
		raw := strings.NewReplacer("%0A", "\n", "%20", " ", "%2B", "+", "%2F", "/", "%3D", "=").Replace(v)
		var blocks []*pem.Block
		for rest := []byte(raw); ; {
			var b *pem.Block
			b, rest = pem.Decode(rest)
			if b == nil {
				break
			}
			blocks = append(blocks, b)
		}
		return blocks
	}
	if b := decode(parts[2], "Cert"); len(b) != 1 || string(b[0].Bytes) != string(c.ClientX.Raw) {
		t.Errorf("Cert decodes to %d blocks, want the client certificate", len(b))
	}
	if b := decode(parts[3], "Chain"); len(b) != 2 || string(b[0].Bytes) != string(c.ClientX.Raw) || string(b[1].Bytes) != string(c.CA.Raw) {
		t.Errorf("Chain decodes to %d blocks, want the client certificate then the CA", len(b))
	}

	// No details asked: By and Hash only; no local certificate: no By.
	if got, want := (XFCC{}).element(c.ServerX, peers), "By=spiffe://td/ns/a/sa/server;Hash="+hash; got != want {
		t.Errorf("element with no details = %q, want %q", got, want)
	}
	if got, want := (XFCC{}).element(nil, peers), "Hash="+hash; got != want {
		t.Errorf("element with no local certificate = %q, want %q", got, want)
	}
	// URI and Subject are present even when the certificate has none; DNS is not.
	bare := certtest.Issue(t, "spiffe://td/ns/a/sa/server", &x509.Certificate{})
	sum = sha256.Sum256(bare.ClientX.Raw)
	p := XFCC{subject: true, uri: true, dns: true}
	if got, want := p.element(nil, []*x509.Certificate{bare.ClientX}), "Hash="+hex.EncodeToString(sum[:])+`;Subject="";URI=`; got != want {
		t.Errorf("element of a bare certificate = %q, want %q", got, want)
	}
}

// TestXFCCOf: the mode and details are read, and a mode outside the
// enum is refused by name.
func TestXFCCOf(t *testing.T) {
	h := &hcmv3.HttpConnectionManager{
		ForwardClientCertDetails:    hcmv3.HttpConnectionManager_APPEND_FORWARD,
		SetCurrentClientCertDetails: &hcmv3.HttpConnectionManager_SetCurrentClientCertDetails{Subject: wrapperspb.Bool(true), Uri: true, Dns: true},
	}
	p, err := XFCCOf(h)
	if err != nil {
		t.Fatal(err)
	}
	if want := (XFCC{mode: hcmv3.HttpConnectionManager_APPEND_FORWARD, subject: true, uri: true, dns: true}); p != want {
		t.Errorf("policy %+v, want %+v", p, want)
	}
	h = &hcmv3.HttpConnectionManager{SetCurrentClientCertDetails: &hcmv3.HttpConnectionManager_SetCurrentClientCertDetails{Cert: true, Chain: true}}
	if p, err := XFCCOf(h); err != nil || !p.cert || !p.chain || p.mode != hcmv3.HttpConnectionManager_SANITIZE {
		t.Errorf("XFCCOf = %v, policy %+v; want SANITIZE with cert and chain", err, p)
	}
	h = &hcmv3.HttpConnectionManager{ForwardClientCertDetails: 42}
	if _, err := XFCCOf(h); err == nil || !strings.Contains(err.Error(), "forward_client_cert_details 42") {
		t.Errorf("XFCCOf(42) = %v, want an error naming forward_client_cert_details", err)
	}
}
