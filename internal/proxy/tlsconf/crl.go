package tlsconf

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/straitmesh/strait/internal/certpem"
)

// crlSet are a validation context's certificate revocation lists (crl).
// As Envoy checks them (BoringSSL with CRL checking on the whole chain,
// only_verify_leaf_cert_crl unset), every certificate of the peer's chain
// below the trust anchor needs a current CRL from its issuer, and must not
// be listed in it.
type crlSet []*x509.RevocationList

// parseCRLs reads vc's crl (certpem.ParseCRLs: PEM "X509 CRL" blocks or
// one DER list, as straitd and the agent check it); nil when vc has none.
func parseCRLs(vc *tlsv3.CertificateValidationContext, path string) (crlSet, error) {
	if vc.GetCrl() == nil {
		return nil, nil
	}
	data, err := dataSource(vc.GetCrl(), path+".crl")
	if err != nil {
		return nil, err
	}
	l, err := certpem.ParseCRLs(data)
	if err != nil {
		return nil, fmt.Errorf("%s.crl: %w", path, err)
	}
	return crlSet(l), nil
}

// check passes when one of the verified chains has, for every
// certificate below its anchor, a current CRL from the issuer that does
// not list it.
func (s crlSet) check(chains [][]*x509.Certificate, now time.Time) error {
	var err error
	for _, chain := range chains {
		if err = s.checkChain(chain, now); err == nil {
			return nil
		}
	}
	if err == nil {
		err = errors.New("no verified chain")
	}
	return err
}

func (s crlSet) checkChain(chain []*x509.Certificate, now time.Time) error {
	for i := 0; i+1 < len(chain); i++ {
		cert, issuer := chain[i], chain[i+1]
		crl := s.from(issuer)
		if crl == nil {
			return fmt.Errorf("no CRL from %q, the issuer of %q (certificate revocation cannot be checked)", issuer.Subject, cert.Subject)
		}
		if !crl.NextUpdate.IsZero() && now.After(crl.NextUpdate) {
			return fmt.Errorf("the CRL from %q expired at %s", issuer.Subject, crl.NextUpdate.UTC().Format(time.RFC3339))
		}
		for _, e := range crl.RevokedCertificateEntries {
			if e.SerialNumber != nil && e.SerialNumber.Cmp(cert.SerialNumber) == 0 {
				return fmt.Errorf("certificate %q (serial %s) is revoked", cert.Subject, cert.SerialNumber)
			}
		}
	}
	return nil
}

// from is the list issuer signed, nil when there is none.
func (s crlSet) from(issuer *x509.Certificate) *x509.RevocationList {
	for _, l := range s {
		if bytes.Equal(l.RawIssuer, issuer.RawSubject) && l.CheckSignatureFrom(issuer) == nil {
			return l
		}
	}
	return nil
}
