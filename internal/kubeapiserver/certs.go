package kubeapiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the key material of one test API server, written to files under
// dir that the kube-apiserver reads.
type pki struct {
	caPEM      []byte // the CA of the serving and client certificates
	clientCert []byte // admin client certificate (O=system:masters), PEM
	clientKey  []byte
	token      string // admin bearer token (group system:masters)

	caFile, servingCertFile, servingKeyFile string
	saPublicFile, saPrivateFile             string
	tokenFile                               string
}

// newPKI generates a CA, a serving certificate for 127.0.0.1, localhost and
// extraIPs,
// an admin client certificate, a service-account signing key and a static
// admin token, and writes the server's files into dir.
func newPKI(dir string, extraIPs []net.IP) (*pki, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "strait-testenv-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	ca, _ := x509.ParseCertificate(caDER)

	leaf := func(tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl.SerialNumber = serial()
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", keyDER), nil
	}
	servingCert, servingKey, err := leaf(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, extraIPs...),
	})
	if err != nil {
		return nil, fmt.Errorf("create serving certificate: %w", err)
	}
	clientCert, clientKey, err := leaf(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "strait-testenv-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("create client certificate: %w", err)
	}
	// Service-account tokens are signed with RSA (RS256) by default.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	var tok [16]byte
	_, _ = rand.Read(tok[:])

	p := &pki{
		caPEM:           pemBlock("CERTIFICATE", caDER),
		clientCert:      clientCert,
		clientKey:       clientKey,
		token:           hex.EncodeToString(tok[:]),
		caFile:          filepath.Join(dir, "ca.crt"),
		servingCertFile: filepath.Join(dir, "apiserver.crt"),
		servingKeyFile:  filepath.Join(dir, "apiserver.key"),
		saPublicFile:    filepath.Join(dir, "sa.pub"),
		saPrivateFile:   filepath.Join(dir, "sa.key"),
		tokenFile:       filepath.Join(dir, "tokens.csv"),
	}
	files := map[string][]byte{
		p.caFile:          p.caPEM,
		p.servingCertFile: servingCert,
		p.servingKeyFile:  servingKey,
		p.saPublicFile:    pemBlock("PUBLIC KEY", saPub),
		p.saPrivateFile:   pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)),
		// token,user,uid,"group1,group2"
		p.tokenFile: fmt.Appendf(nil, "%s,strait-testenv-admin,strait-testenv-admin,\"system:masters\"\n", p.token),
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
