package stats

import "sync/atomic"

// SSLStats are the TLS transport socket counters of a cluster or a
// listener (Envoy's ssl.* stats). They are rendered once a TLS handshake
// was attempted, so plaintext clusters and listeners do not list them.
type SSLStats struct {
	Handshake       atomic.Uint64 // ssl.handshake: completed handshakes
	ConnectionError atomic.Uint64 // ssl.connection_error: failed handshakes
}

func (s *SSLStats) each(f func(name string, v uint64)) {
	h, e := s.Handshake.Load(), s.ConnectionError.Load()
	if h == 0 && e == 0 {
		return
	}
	f("ssl.handshake", h)
	f("ssl.connection_error", e)
}
