package sds

import (
	"crypto/x509"
	"encoding/json"
	"net/http"

	"github.com/straitmesh/strait/internal/debugapi"
)

func certInfo(c *x509.Certificate) debugapi.CertInfo {
	ci := debugapi.CertInfo{SerialNumber: c.SerialNumber.Text(16), NotBefore: c.NotBefore.UTC(), NotAfter: c.NotAfter.UTC(), SHA256: Fingerprint(c)}
	for _, u := range c.URIs {
		ci.SPIFFEIDs = append(ci.SPIFFEIDs, u.String())
	}
	if len(c.Subject.Names) > 0 {
		ci.Subject = c.Subject.String()
	}
	return ci
}

// Dump describes the current secrets (empty before the first certificate).
func Dump(cur *Secrets) debugapi.SecretsDump {
	d := debugapi.SecretsDump{Secrets: []debugapi.SecretInfo{}}
	if cur == nil {
		return d
	}
	def := debugapi.SecretInfo{Name: ResourceDefault, Type: "Cert Chain", Version: cur.Version}
	if chain, err := parsePEMCerts(cur.CertChainPEM); err == nil {
		for _, c := range chain {
			def.Certs = append(def.Certs, certInfo(c))
		}
	}
	root := debugapi.SecretInfo{Name: ResourceRootCA, Type: "CA", Version: cur.Version}
	for _, c := range cur.Roots {
		root.Certs = append(root.Certs, certInfo(c))
	}
	d.Secrets = append(d.Secrets, def, root)
	return d
}

// DebugHandler serves Dump of the store as JSON. It never shows a key.
func DebugHandler(store *Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		cur, _ := store.Current()
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(Dump(cur))
	})
}
