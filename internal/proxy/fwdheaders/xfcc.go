package fwdheaders

// This file is the HCM's x-forwarded-client-cert (XFCC) rules, as Envoy's
// ConnectionManagerUtility::mutateXfccRequestHeader
// (source/common/http/conn_manager_utility.cc) applies
// forward_client_cert_details to every request before it is routed:
//
//   - ALWAYS_FORWARD_ONLY: the client's header is forwarded unchanged,
//     whatever the connection.
//   - SANITIZE (the default), or any mode on a connection that is not
//     mutual TLS (no client certificate): the client's header is removed.
//   - FORWARD_ONLY: the client's header is forwarded unchanged.
//   - APPEND_FORWARD: this hop's element is appended to the client's
//     header, after a ",".
//   - SANITIZE_SET: the header is replaced by this hop's element.
//
// This hop's element is ";"-separated key=value pairs in Envoy's order:
// By= for each URI SAN of the certificate the proxy presented, Hash= the
// hex SHA-256 of the client's certificate, then what
// set_current_client_cert_details asks for, in the order Envoy's HCM
// config builds it: Cert="…" (the client's certificate as PEM) and
// Chain="…" (its chain as it sent it, leaf first) with newlines, spaces,
// '+', '/' and '=' percent-encoded as Envoy's
// urlEncodedPemEncodedPeerCertificate does; Subject="…" (RFC 2253 form,
// present even when empty); URI= for each URI SAN of the client's
// certificate ("URI=" when it has none); DNS= for each DNS SAN.

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"strings"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// headerXFCC is the header this file edits.
const headerXFCC = "X-Forwarded-Client-Cert"

// XFCC is what the HCM config says about x-forwarded-client-cert.
type XFCC struct {
	mode hcmv3.HttpConnectionManager_ForwardClientCertDetails
	// The details of set_current_client_cert_details.
	cert, chain, subject, uri, dns bool
}

// XFCCOf reads forward_client_cert_details and
// set_current_client_cert_details of h, refusing a value or field it does
// not implement by name.
func XFCCOf(h *hcmv3.HttpConnectionManager) (XFCC, error) {
	mode := h.GetForwardClientCertDetails()
	if _, ok := hcmv3.HttpConnectionManager_ForwardClientCertDetails_name[int32(mode)]; !ok {
		return XFCC{}, fmt.Errorf("forward_client_cert_details %d is not a known value (SANITIZE, FORWARD_ONLY, APPEND_FORWARD, SANITIZE_SET or ALWAYS_FORWARD_ONLY)", int32(mode))
	}
	d := h.GetSetCurrentClientCertDetails()
	if d != nil {
		if err := fieldaudit.Only("set_current_client_cert_details", d.ProtoReflect(), setCurrentClientCertDetailsFields); err != nil {
			return XFCC{}, fmt.Errorf("%w (remove it)", err)
		}
	}
	return XFCC{
		mode:    mode,
		cert:    d.GetCert(),
		chain:   d.GetChain(),
		subject: d.GetSubject().GetValue(),
		uri:     d.GetUri(),
		dns:     d.GetDns(),
	}, nil
}

// sets reports whether the policy writes this hop's element.
func (p XFCC) sets() bool {
	return p.mode == hcmv3.HttpConnectionManager_APPEND_FORWARD || p.mode == hcmv3.HttpConnectionManager_SANITIZE_SET
}

// XFCCConn is what the XFCC rules need of one downstream connection,
// computed once when it is accepted (XFCC.Conn).
type XFCCConn struct {
	mtls    bool   // TLS terminated by the proxy, and the client presented a certificate
	element string // this hop's element; only when the policy sets one
}

// Conn describes c for the policy.
func (p XFCC) Conn(c net.Conn) XFCCConn {
	tc := tlsconf.Terminated(c)
	if tc == nil {
		return XFCCConn{}
	}
	peers := tc.ConnectionState().PeerCertificates
	if len(peers) == 0 {
		return XFCCConn{}
	}
	out := XFCCConn{mtls: true}
	if p.sets() {
		out.element = p.element(tlsconf.LocalCertificate(c), peers)
	}
	return out
}

// element is this hop's XFCC element for a connection on which the proxy
// presented local (nil: unknown) and the client sent peers (leaf first).
func (p XFCC) element(local *x509.Certificate, peers []*x509.Certificate) string {
	var parts []string
	if local != nil {
		for _, u := range local.URIs {
			parts = append(parts, "By="+u.String())
		}
	}
	leaf := peers[0]
	sum := sha256.Sum256(leaf.Raw)
	parts = append(parts, "Hash="+hex.EncodeToString(sum[:]))
	if p.cert {
		parts = append(parts, `Cert="`+pemURLEncoded(peers[:1])+`"`)
	}
	if p.chain {
		parts = append(parts, `Chain="`+pemURLEncoded(peers)+`"`)
	}
	if p.subject {
		parts = append(parts, `Subject="`+leaf.Subject.String()+`"`)
	}
	if p.uri {
		if len(leaf.URIs) == 0 {
			parts = append(parts, "URI=")
		}
		for _, u := range leaf.URIs {
			parts = append(parts, "URI="+u.String())
		}
	}
	if p.dns {
		for _, n := range leaf.DNSNames {
			parts = append(parts, "DNS="+n)
		}
	}
	return strings.Join(parts, ";")
}

// pemEscaper percent-encodes the characters of PEM text that Envoy
// encodes in XFCC's Cert and Chain.
var pemEscaper = strings.NewReplacer("\n", "%0A", " ", "%20", "+", "%2B", "/", "%2F", "=", "%3D")

// pemURLEncoded is the certificates as concatenated PEM blocks, encoded
// for XFCC.
func pemURLEncoded(certs []*x509.Certificate) string {
	var b strings.Builder
	for _, c := range certs {
		b.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
	}
	return pemEscaper.Replace(b.String())
}

// apply returns the x-forwarded-client-cert a request leaves with, given
// the client's (v, has says it sent one) on connection c: keep false
// removes the header.
func (p XFCC) apply(v string, has bool, c XFCCConn) (out string, keep bool) {
	switch {
	case p.mode == hcmv3.HttpConnectionManager_ALWAYS_FORWARD_ONLY:
		return v, has
	case p.mode == hcmv3.HttpConnectionManager_SANITIZE || !c.mtls:
		return "", false
	case p.mode == hcmv3.HttpConnectionManager_FORWARD_ONLY:
		return v, has
	case p.mode == hcmv3.HttpConnectionManager_APPEND_FORWARD && has && v != "":
		return v + "," + c.element, true
	default: // APPEND_FORWARD with no header, SANITIZE_SET
		return c.element, true
	}
}

// ApplyHTTP applies the rules to a request on the http.Request path
// (HTTP/2) on connection c.
func (p XFCC) ApplyHTTP(r *http.Request, c XFCCConn) {
	vv, has := r.Header[headerXFCC]
	v, keep := p.apply(strings.Join(vv, ","), has, c)
	switch {
	case !keep:
		delete(r.Header, headerXFCC)
	case !has || len(vv) != 1 || vv[0] != v:
		r.Header[headerXFCC] = []string{v}
	}
}

// ApplyH1 applies the rules to the fields hs of an HTTP/1.1 request on
// connection c, editing them in place, and returns them.
func (p XFCC) ApplyH1(hs http1.Headers, c XFCCConn) http1.Headers {
	if p.mode == hcmv3.HttpConnectionManager_ALWAYS_FORWARD_ONLY ||
		(p.mode == hcmv3.HttpConnectionManager_FORWARD_ONLY && c.mtls) {
		return hs // unchanged: skip the search
	}
	v, has := hs.Lookup(headerXFCC)
	out, keep := p.apply(v, has, c)
	if has {
		hs = RemoveHeader(hs, headerXFCC)
	}
	if keep {
		hs = append(hs, http1.Header{Name: []byte("x-forwarded-client-cert"), Value: []byte(out)})
	}
	return hs
}
