package sds

import (
	"crypto/x509"
	"encoding/json"
	"net/http"
	"time"
)

// CertInfo describes one certificate for `straitctl proxy-config secret`.
type CertInfo struct {
	SerialNumber string    `json:"serial_number"`
	NotBefore    time.Time `json:"not_before"`
	NotAfter     time.Time `json:"not_after"`
	// SPIFFEIDs are the URI SANs (workload certificates).
	SPIFFEIDs []string `json:"spiffe_ids,omitempty"`
	Subject   string   `json:"subject,omitempty"`
	// SHA256 is the fingerprint of the DER certificate.
	SHA256 string `json:"sha256"`
}

// SecretInfo is one SDS resource as the agent serves it.
type SecretInfo struct {
	Name    string     `json:"name"`
	Type    string     `json:"type"` // "Cert Chain" or "CA", as istioctl prints them
	Version string     `json:"version"`
	Certs   []CertInfo `json:"certs"`
}

// SecretsDump is GET /debug/secrets on the agent's status port.
type SecretsDump struct {
	Secrets []SecretInfo `json:"secrets"`
}

func certInfo(c *x509.Certificate) CertInfo {
	ci := CertInfo{SerialNumber: c.SerialNumber.Text(16), NotBefore: c.NotBefore.UTC(), NotAfter: c.NotAfter.UTC(), SHA256: Fingerprint(c)}
	for _, u := range c.URIs {
		ci.SPIFFEIDs = append(ci.SPIFFEIDs, u.String())
	}
	if len(c.Subject.Names) > 0 {
		ci.Subject = c.Subject.String()
	}
	return ci
}

// Dump describes the current secrets (empty before the first certificate).
func Dump(cur *Secrets) SecretsDump {
	d := SecretsDump{Secrets: []SecretInfo{}}
	if cur == nil {
		return d
	}
	def := SecretInfo{Name: ResourceDefault, Type: "Cert Chain", Version: cur.Version}
	if chain, err := parsePEMCerts(cur.CertChainPEM); err == nil {
		for _, c := range chain {
			def.Certs = append(def.Certs, certInfo(c))
		}
	}
	root := SecretInfo{Name: ResourceRootCA, Type: "CA", Version: cur.Version}
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
