package token

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestIssueVerify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ca", KeyFile)
	k, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v, want mode 0600", st, err)
	}
	again, err := LoadOrCreateKey(path)
	if err != nil || string(again) != string(k) {
		t.Fatalf("second load made a new key (%v)", err)
	}
	now := time.Unix(1_800_000_000, 0)
	tok, err := k.Issue(Claims{Namespace: "demo", ServiceAccount: "client", IssuedAt: now.Unix(), Expiry: now.Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, Prefix) {
		t.Fatalf("token %q lacks the prefix", tok)
	}
	c, err := k.Verify(tok, now.Add(59*time.Minute))
	if err != nil || c.Namespace != "demo" || c.ServiceAccount != "client" || c.Audience != Audience {
		t.Fatalf("verify: %+v %v", c, err)
	}
	if _, err := k.Verify(tok, now.Add(time.Hour)); !errors.Is(err, ErrExpired) {
		t.Errorf("at expiry: %v, want ErrExpired", err)
	}
	other, _ := LoadOrCreateKey(filepath.Join(t.TempDir(), KeyFile))
	if _, err := other.Verify(tok, now); !errors.Is(err, ErrSignature) {
		t.Errorf("another key: %v, want ErrSignature", err)
	}
	// Changing the claims (another service account) breaks the MAC.
	forged, _ := k.Issue(Claims{Namespace: "demo", ServiceAccount: "admin", IssuedAt: now.Unix(), Expiry: now.Add(time.Hour).Unix()})
	payload := strings.Split(forged, ".")[1]
	parts := strings.Split(tok, ".")
	if _, err := k.Verify(parts[0]+"."+payload+"."+parts[2], now); !errors.Is(err, ErrSignature) {
		t.Errorf("swapped payload: %v, want ErrSignature", err)
	}
	wrongAud, _ := k.Issue(Claims{Namespace: "demo", ServiceAccount: "client", Audience: "other", IssuedAt: now.Unix(), Expiry: now.Add(time.Hour).Unix()})
	if _, err := k.Verify(wrongAud, now); err == nil || !strings.Contains(err.Error(), `audience "other"`) {
		t.Errorf("wrong audience: %v", err)
	}
	for _, bad := range []string{"", "eyJhbGciOi.x.y", Prefix + "nodot", Prefix + "a.b!"} {
		if _, err := k.Verify(bad, now); err == nil {
			t.Errorf("%q verified", bad)
		}
	}
	if _, err := k.Issue(Claims{Namespace: "demo", IssuedAt: 1, Expiry: 2}); err == nil {
		t.Error("issued without a service account")
	}
	if _, err := k.Issue(Claims{Namespace: "demo", ServiceAccount: "a", IssuedAt: 2, Expiry: 2}); err == nil {
		t.Error("issued with expiry == issued at")
	}
}

func TestLoadKeyRejectsShortKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), KeyFile)
	if err := os.WriteFile(path, []byte("abcd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateKey(path); err == nil {
		t.Fatal("a 2-byte key was accepted")
	}
}

// A correctly signed token whose claims lack the service account (or the
// namespace) is refused: Issue never makes one, but a key holder could.
func TestVerifyRefusesIncompleteClaims(t *testing.T) {
	k, err := LoadOrCreateKey(filepath.Join(t.TempDir(), KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, payload := range []string{
		`{"ns":"demo","sa":"","aud":"istio-ca","iat":1,"exp":4000000000}`,
		`{"ns":"","sa":"client","aud":"istio-ca","iat":1,"exp":4000000000}`,
	} {
		signed := Prefix + base64.RawURLEncoding.EncodeToString([]byte(payload))
		tok := signed + "." + base64.RawURLEncoding.EncodeToString(k.mac(signed))
		if _, err := k.Verify(tok, time.Unix(2, 0)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", payload, err)
		}
	}
}
