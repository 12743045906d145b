package tlsconf

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// TLS session resumption between sidecars, as Envoy does it: a server
// socket issues TLS 1.3 session tickets (unless
// disable_stateless_session_resumption), sealed with keys of its own that
// it rotates (ticketKeys); a client socket keeps up to max_session_keys
// sessions (Envoy's default 1; 0: none) and offers one on its next
// handshake. A resumed connection skips the certificate exchange, so:
//
//   - the peer's certificates come from the session, and are verified again
//     against the trust bundle, revocation lists and subject alt names
//     current at the resumption (VerifyConnection), so that a rotated
//     bundle or an identity no longer allowed never resumes;
//   - a client's sessions are kept per certificate it presented
//     (certSessions): after its certificate rotates, the next handshake is
//     a full one, with the new certificate, and a session never carries
//     another identity than the one the client presents now;
//   - a server's tickets name the certificate it presented (bindings in
//     the ticket, checked when it comes back), so that after its
//     certificate rotates the next handshake is a full one too;
//   - what the proxy presented (the local certificate, for XFCC's By and
//     the source principal) is the certificate the session was made with,
//     which is the current one by the two rules above.

// ticketKeyRotation is how often a server socket makes a new ticket key;
// tickets sealed with the one before still open, so a ticket lives at
// most twice that (crypto/tls's own keys rotate daily too).
const ticketKeyRotation = 24 * time.Hour

// ticketKeys are the session ticket keys of one server socket, newest
// first. Safe for concurrent use.
type ticketKeys struct {
	mu   sync.Mutex
	keys [][32]byte
	made time.Time // when keys[0] was made
}

// current returns the keys to seal (the first) and open tickets with,
// rotating them when the newest is older than ticketKeyRotation.
func (k *ticketKeys) current(now time.Time) ([][32]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.keys) == 0 || now.Sub(k.made) >= ticketKeyRotation {
		var key [32]byte
		if _, err := rand.Read(key[:]); err != nil {
			return nil, fmt.Errorf("tls: session ticket key: %w", err)
		}
		keys := [][32]byte{key}
		if len(k.keys) > 0 {
			keys = append(keys, k.keys[0])
		}
		k.keys, k.made = keys, now
	}
	return k.keys, nil
}

// certPrint is a certificate and the fingerprint of its leaf, remembered
// so that a handshake hashes a certificate only when it changed.
type certPrint struct {
	cert *tls.Certificate
	sum  string
}

// fingerprints remembers the fingerprint of the last certificate asked.
type fingerprints struct{ last atomic.Pointer[certPrint] }

// of returns the hex SHA-256 of cert's leaf ("" for no certificate).
func (f *fingerprints) of(cert *tls.Certificate) string {
	if cert == nil || len(cert.Certificate) == 0 {
		return ""
	}
	if p := f.last.Load(); p != nil && p.cert == cert {
		return p.sum
	}
	h := sha256.Sum256(cert.Certificate[0])
	p := &certPrint{cert: cert, sum: hex.EncodeToString(h[:])}
	f.last.Store(p)
	return p.sum
}

// ticketBinding is the extra data a server's ticket carries: the
// certificate the server presented.
func ticketBinding(sum string) []byte { return []byte("strait/cert/" + sum) }

// bindTickets makes cfg's tickets (sealed with keys) name the certificate
// the server presents now, and refuses a ticket that names another one.
// cert returns the current certificate.
func bindTickets(cfg *tls.Config, keys [][32]byte, prints *fingerprints, cert func() (*tls.Certificate, error)) {
	cfg.SetSessionTicketKeys(keys)
	binding := func() ([]byte, error) {
		c, err := cert()
		if err != nil {
			return nil, err
		}
		return ticketBinding(prints.of(c)), nil
	}
	cfg.WrapSession = func(cs tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
		b, err := binding()
		if err != nil {
			return nil, err
		}
		ss.Extra = append(ss.Extra[:0:0], b)
		return cfg.EncryptTicket(cs, ss)
	}
	cfg.UnwrapSession = func(identity []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
		ss, err := cfg.DecryptTicket(identity, cs)
		if err != nil || ss == nil {
			return nil, err // nil, nil: not ours or expired; full handshake
		}
		b, err := binding()
		if err != nil {
			return nil, err
		}
		if len(ss.Extra) != 1 || string(ss.Extra[0]) != string(b) {
			return nil, nil // made with another certificate: full handshake
		}
		return ss, nil
	}
}

// sessionCache is a client socket's sessions: max_session_keys of them
// across the certificates it presents and the servers it reaches.
type sessionCache struct {
	lru    tls.ClientSessionCache // nil: resumption is off (max_session_keys 0)
	prints fingerprints
}

func newSessionCache(maxKeys uint32) *sessionCache {
	c := &sessionCache{}
	if maxKeys > 0 {
		c.lru = tls.NewLRUClientSessionCache(int(maxKeys))
	}
	return c
}

// forCert returns the cache a handshake presenting cert uses: the
// sessions made with that certificate only. nil when resumption is off.
func (c *sessionCache) forCert(cert *tls.Certificate) tls.ClientSessionCache {
	if c == nil || c.lru == nil {
		return nil
	}
	return &certSessions{lru: c.lru, prefix: "cert:" + c.prints.of(cert) + "|"}
}

// certSessions is a view of a sessionCache for one client certificate.
type certSessions struct {
	lru    tls.ClientSessionCache
	prefix string
}

func (s *certSessions) Get(key string) (*tls.ClientSessionState, bool) {
	return s.lru.Get(s.prefix + key)
}

func (s *certSessions) Put(key string, cs *tls.ClientSessionState) {
	s.lru.Put(s.prefix+key, cs)
}

// verifyResumed verifies the peer certificates a resumed session carries
// with c's current trust (verifyCerts); a full handshake was verified by
// VerifyPeerCertificate already. optional says a peer without a
// certificate is accepted (a server that does not require one).
func (c *common) verifyResumed(cs tls.ConnectionState, optional bool) error {
	if !cs.DidResume || c.roots == nil {
		return nil
	}
	if len(cs.PeerCertificates) == 0 {
		if optional {
			return nil
		}
		return errors.New("tls: resumed session without a peer certificate")
	}
	return c.verifyCerts(cs.PeerCertificates)
}
