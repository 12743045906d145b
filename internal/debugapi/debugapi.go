// Package debugapi holds the JSON documents of straitd's /debug endpoints
// (/debug/connections, /debug/syncz), shared by the xDS server that writes
// them and the tools that read them (straitctl proxy-status). It imports
// nothing of Strait's, so that a client does not link the server.
package debugapi

import "time"

// ConnectionStatus is one entry of /debug/connections.
type ConnectionStatus struct {
	ConnectionID string          `json:"connection_id"`
	ProxyID      string          `json:"proxy_id"`
	IP           string          `json:"ip"`
	Peer         string          `json:"peer"`
	Delta        bool            `json:"delta,omitempty"`
	ConnectedAt  time.Time       `json:"connected_at"`
	Watched      []WatchedStatus `json:"watched"`
}

// WatchedStatus is one subscription of a connection.
type WatchedStatus struct {
	TypeURL       string    `json:"type_url"`
	ResourceNames []string  `json:"resource_names,omitempty"`
	Wildcard      bool      `json:"wildcard,omitempty"`
	VersionSent   string    `json:"version_sent"`
	NonceSent     string    `json:"nonce_sent"`
	LastSent      time.Time `json:"last_sent,omitzero"`
	VersionAcked  string    `json:"version_acked"`
	NonceAcked    string    `json:"nonce_acked"`
	NackError     string    `json:"nack_error,omitempty"`
	NonceNacked   string    `json:"nonce_nacked,omitempty"`
	LastNack      time.Time `json:"last_nack,omitzero"`
}

// SyncStatus is one entry of /debug/syncz: where each type of one proxy
// stands.
type SyncStatus struct {
	ProxyID      string           `json:"proxy_id"`
	ConnectionID string           `json:"connection_id"`
	Types        []TypeSyncStatus `json:"types"`
}

// TypeSyncStatus is the sync state of one type. Type is cds, eds, lds, rds
// or, for other types, the type URL. Synced means the last sent nonce was
// ACKed; LastNack is the error of a NACK of the last sent nonce.
type TypeSyncStatus struct {
	Type     string `json:"type"`
	Sent     string `json:"sent"`
	Acked    string `json:"acked"`
	Synced   bool   `json:"synced"`
	LastNack string `json:"last_nack,omitempty"`
}
