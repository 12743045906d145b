// Package token issues and verifies straitd's file-mode workload tokens.
//
// On Kubernetes a workload proves who it is with its service-account token,
// checked by a TokenReview. A host with no cluster has no such token, so
// straitd owns a secret key (KeyFile in its CA directory, 0600) and
// `straitctl token create` uses it to issue a token for one namespace and
// service account; the user stores the token beside the workload, where the
// agent reads it (Istio's ./var/run/secrets/tokens/istio-token) and sends
// it with its certificate request. Whoever can read the key can mint
// tokens, so it is as sensitive as the CA key; replacing it revokes every
// token issued so far.
//
// A token is "st1.<payload>.<mac>": the payload is base64url JSON
// {ns, sa, aud, iat, exp}, the MAC is HMAC-SHA256 over "st1.<payload>"
// under the key, base64url.
package token

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const (
	// Prefix starts every token; other bearer tokens (Kubernetes JWTs)
	// never start with it, so an authenticator can tell them apart.
	Prefix = "st1."
	// Audience is the audience tokens are issued for, Istio's CA audience.
	Audience = "istio-ca"
	// KeyFile is the key's file name in straitd's CA directory.
	KeyFile = "token-key"
	keySize = 32
)

// Errors a caller may branch on.
var (
	ErrMalformed = errors.New("malformed token")
	ErrSignature = errors.New("token signature does not verify with this straitd's key (issued by another straitd, or the key was replaced)")
	ErrExpired   = errors.New("token expired")
)

// Claims are what a token asserts.
type Claims struct {
	Namespace      string `json:"ns"`
	ServiceAccount string `json:"sa"`
	Audience       string `json:"aud"`
	IssuedAt       int64  `json:"iat"`
	Expiry         int64  `json:"exp"`
}

// Key is the HMAC key.
type Key []byte

// LoadOrCreateKey reads the key at path, creating a new random one (0600)
// if there is none.
func LoadOrCreateKey(path string) (Key, error) {
	k, err := LoadKey(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return k, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("token key: %w", err)
	}
	k = make(Key, keySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("token key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return LoadKey(path) // another process made it first
	}
	if err != nil {
		return nil, fmt.Errorf("token key: %w", err)
	}
	if _, err := f.WriteString(hex.EncodeToString(k) + "\n"); err != nil {
		f.Close()
		return nil, fmt.Errorf("token key: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("token key: %w", err)
	}
	return k, nil
}

// LoadKey reads the key at path (hex).
func LoadKey(path string) (Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("token key: %w", err)
	}
	k, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(k) < keySize {
		return nil, fmt.Errorf("token key %s: want %d hex-encoded bytes", path, keySize)
	}
	return k, nil
}

// Issue returns a token for c. Audience defaults to istio-ca.
func (k Key) Issue(c Claims) (string, error) {
	if c.Namespace == "" || c.ServiceAccount == "" {
		return "", errors.New("token: namespace and service account are required")
	}
	if c.Expiry <= c.IssuedAt {
		return "", errors.New("token: expiry must be after issue time")
	}
	if c.Audience == "" {
		c.Audience = Audience
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	signed := Prefix + base64.RawURLEncoding.EncodeToString(payload)
	return signed + "." + base64.RawURLEncoding.EncodeToString(k.mac(signed)), nil
}

// Verify checks the token's MAC, audience and expiry at now.
func (k Key) Verify(tok string, now time.Time) (Claims, error) {
	rest, ok := strings.CutPrefix(tok, Prefix)
	if !ok {
		return Claims{}, fmt.Errorf("%w: does not start with %q", ErrMalformed, Prefix)
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return Claims{}, fmt.Errorf("%w: want st1.<payload>.<mac>", ErrMalformed)
	}
	mac, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: mac: %w", ErrMalformed, err)
	}
	if !hmac.Equal(mac, k.mac(Prefix+payload)) {
		return Claims{}, ErrSignature
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: payload: %w", ErrMalformed, err)
	}
	var c Claims
	if err := json.Unmarshal(raw, &c); err != nil {
		return Claims{}, fmt.Errorf("%w: payload: %w", ErrMalformed, err)
	}
	if c.Audience != Audience {
		return Claims{}, fmt.Errorf("token audience %q is not %q", c.Audience, Audience)
	}
	if c.Namespace == "" || c.ServiceAccount == "" {
		return Claims{}, fmt.Errorf("%w: no namespace or service account", ErrMalformed)
	}
	if exp := time.Unix(c.Expiry, 0); !now.Before(exp) {
		return Claims{}, fmt.Errorf("%w at %s (issue a new one with straitctl token create)", ErrExpired, exp.UTC().Format(time.RFC3339))
	}
	return c, nil
}

func (k Key) mac(s string) []byte {
	h := hmac.New(sha256.New, k)
	h.Write([]byte(s))
	return h.Sum(nil)
}
