// Package certpem parses the X.509 material that credentials carry as
// PEM: certificate revocation lists, read the same way by every part
// that checks or serves one (straitd's registries, strait-agent's SDS
// files), so that what the control plane accepts is what the proxy
// loads.
package certpem

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// ParseCRLs parses b as Envoy reads a validation context's crl: the PEM
// "X509 CRL" blocks it holds (other blocks are skipped), or, when it
// holds none, one DER list. An empty b is an error: a CRL file that is
// there must revoke from something.
func ParseCRLs(b []byte) ([]*x509.RevocationList, error) {
	if len(b) == 0 {
		return nil, errors.New("empty revocation list")
	}
	var out []*x509.RevocationList
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "X509 CRL" {
			continue
		}
		l, err := x509.ParseRevocationList(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", len(out)+1, err)
		}
		out = append(out, l)
	}
	if len(out) > 0 {
		return out, nil
	}
	l, err := x509.ParseRevocationList(b)
	if err != nil {
		return nil, fmt.Errorf("no PEM \"X509 CRL\" block and not a DER CRL: %w", err)
	}
	return []*x509.RevocationList{l}, nil
}
