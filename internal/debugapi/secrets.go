package debugapi

import "time"

// SecretsDump is the agent's GET /debug/secrets (status port 15020): the
// certificates it serves to the proxy over SDS, never the key. straitctl
// proxy-config secret prints it.
type SecretsDump struct {
	Secrets []SecretInfo `json:"secrets"`
}

// SecretInfo is one SDS resource.
type SecretInfo struct {
	Name    string     `json:"name"`
	Type    string     `json:"type"` // "Cert Chain" or "CA", as istioctl prints them
	Version string     `json:"version"`
	Certs   []CertInfo `json:"certs"`
}

// CertInfo describes one certificate.
type CertInfo struct {
	SerialNumber string    `json:"serial_number"`
	NotBefore    time.Time `json:"not_before"`
	NotAfter     time.Time `json:"not_after"`
	// SPIFFEIDs are the URI SANs (workload certificates).
	SPIFFEIDs []string `json:"spiffe_ids,omitempty"`
	Subject   string   `json:"subject,omitempty"`
	// SHA256 is the fingerprint of the DER certificate, hex.
	SHA256 string `json:"sha256"`
}
