package jwtauthn

// One token against one provider, in the order of Envoy's
// AuthenticatorImpl::startVerify: the form, the issuer, the time limits,
// the audiences, then a key of the JWKS that matches the token's kid and
// alg and verifies its signature. The signature check is go-jose's.

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Status is the outcome of a check, with Envoy's (jwt_verify_lib's)
// texts, which are the body of a failure's local reply.
type Status uint8

// The statuses, named after jwt_verify_lib's Status values.
const (
	OK Status = iota
	JwtMissed
	JwtNotYetValid
	JwtExpired
	JwtBadFormat
	JwtHeaderParseErrorBadBase64
	JwtHeaderParseErrorBadJSON
	JwtHeaderBadAlg
	JwtHeaderNotImplementedAlg
	JwtPayloadParseErrorBadBase64
	JwtPayloadParseErrorBadJSON
	JwtVerificationFail
	JwtUnknownIssuer
	JwtAudienceNotAllowed
	JwksKidAlgMismatch
)

var statusText = [...]string{
	OK:                            "OK",
	JwtMissed:                     "Jwt is missing",
	JwtNotYetValid:                "Jwt not yet valid",
	JwtExpired:                    "Jwt is expired",
	JwtBadFormat:                  "Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections",
	JwtHeaderParseErrorBadBase64:  "Jwt header is an invalid Base64url encoded",
	JwtHeaderParseErrorBadJSON:    "Jwt header is an invalid JSON",
	JwtHeaderBadAlg:               "Jwt header [alg] field is required and must be a string",
	JwtHeaderNotImplementedAlg:    "Jwt header [alg] is not supported",
	JwtPayloadParseErrorBadBase64: "Jwt payload is an invalid Base64url encoded",
	JwtPayloadParseErrorBadJSON:   "Jwt payload is an invalid JSON",
	JwtVerificationFail:           "Jwt verification fails",
	JwtUnknownIssuer:              "Jwt issuer is not configured",
	JwtAudienceNotAllowed:         "Audiences in Jwt are not allowed",
	JwksKidAlgMismatch:            "Jwks doesn't have key to match kid or alg from Jwt",
}

func (s Status) String() string {
	if int(s) < len(statusText) {
		return statusText[s]
	}
	return fmt.Sprintf("status %d", s)
}

// algorithms are the signature algorithms the filter verifies.
var algorithms = map[string]jose.SignatureAlgorithm{
	"RS256": jose.RS256, "RS384": jose.RS384, "RS512": jose.RS512,
	"PS256": jose.PS256, "PS384": jose.PS384, "PS512": jose.PS512,
	"ES256": jose.ES256, "ES384": jose.ES384, "ES512": jose.ES512,
	"EdDSA": jose.EdDSA,
	"HS256": jose.HS256, "HS384": jose.HS384, "HS512": jose.HS512,
}

// key is one usable JWKS key.
type key struct {
	kid string
	alg string // the JWK's alg; empty: any its type allows
	pub any    // *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey or []byte
}

// fits reports whether k can verify a token signed with alg.
func (k *key) fits(alg string) bool {
	if k.alg != "" && k.alg != alg {
		return false
	}
	switch p := k.pub.(type) {
	case *rsa.PublicKey:
		return alg[0] == 'R' || alg[0] == 'P'
	case *ecdsa.PublicKey:
		switch alg {
		case "ES256":
			return p.Curve == elliptic.P256()
		case "ES384":
			return p.Curve == elliptic.P384()
		case "ES512":
			return p.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return alg == "EdDSA"
	case []byte:
		return alg[0] == 'H'
	}
	return false
}

// parseJWKS reads a JWKS; a key it cannot use (an unknown kty, a private
// part only) is skipped, as Envoy's Jwks::createFrom skips it.
func parseJWKS(data []byte) ([]key, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("jwks is not JSON: %w", err)
	}
	var out []key
	for _, raw := range set.Keys {
		var jwk jose.JSONWebKey
		if err := jwk.UnmarshalJSON(raw); err != nil {
			continue
		}
		if jwk.Use != "" && jwk.Use != "sig" {
			continue
		}
		pub := jwk.Key
		switch k := pub.(type) {
		case *rsa.PrivateKey:
			pub = &k.PublicKey
		case *ecdsa.PrivateKey:
			pub = &k.PublicKey
		case ed25519.PrivateKey:
			pub = k.Public()
		}
		out = append(out, key{kid: jwk.KeyID, alg: jwk.Algorithm, pub: pub})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("jwks has no usable key")
	}
	return out, nil
}

// verifyToken checks t against p, with audiences aud.
func (p *provider) verifyToken(t token, aud []string, now time.Time) (Status, *Verified) {
	raw := t.token
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return JwtBadFormat, nil
	}
	hdrJSON, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[0], "="))
	if err != nil {
		return JwtHeaderParseErrorBadBase64, nil
	}
	var hdr map[string]any
	if json.Unmarshal(hdrJSON, &hdr) != nil {
		return JwtHeaderParseErrorBadJSON, nil
	}
	alg, ok := hdr["alg"].(string)
	if !ok {
		return JwtHeaderBadAlg, nil
	}
	sigAlg, ok := algorithms[alg]
	if !ok {
		return JwtHeaderNotImplementedAlg, nil
	}
	kid, _ := hdr["kid"].(string)
	plJSON, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return JwtPayloadParseErrorBadBase64, nil
	}
	var claims map[string]any
	dec := json.NewDecoder(bytes.NewReader(plJSON))
	dec.UseNumber()
	if dec.Decode(&claims) != nil || claims == nil {
		return JwtPayloadParseErrorBadJSON, nil
	}
	iss, _ := claims["iss"].(string)
	if p.issuer != "" && iss != p.issuer {
		return JwtUnknownIssuer, nil
	}
	if st := checkTime(claims, now, p.clockSkew); st != OK {
		return st, nil
	}
	if len(aud) > 0 && !audienceAllowed(stringList(claims["aud"]), aud) {
		return JwtAudienceNotAllowed, nil
	}
	jws, err := jose.ParseSigned(raw, []jose.SignatureAlgorithm{sigAlg})
	if err != nil {
		return JwtBadFormat, nil
	}
	found := false
	for i := range p.keys {
		k := &p.keys[i]
		if kid != "" && k.kid != "" && k.kid != kid {
			continue
		}
		if !k.fits(alg) {
			continue
		}
		found = true
		if _, err := jws.Verify(k.pub); err == nil {
			return OK, &Verified{provider: p, raw: raw, payload: strings.TrimRight(parts[1], "="), claims: claims, location: t.loc}
		}
	}
	if !found {
		return JwksKidAlgMismatch, nil
	}
	return JwtVerificationFail, nil
}

// checkTime applies exp and nbf with the clock skew.
func checkTime(claims map[string]any, now time.Time, skew time.Duration) Status {
	sec := func(name string) (int64, bool, bool) {
		v, ok := claims[name]
		if !ok {
			return 0, false, true
		}
		n, ok := v.(json.Number)
		if !ok {
			return 0, true, false
		}
		if i, err := n.Int64(); err == nil {
			return i, true, true
		}
		f, err := n.Float64()
		return int64(f), true, err == nil
	}
	if nbf, ok, good := sec("nbf"); !good {
		return JwtPayloadParseErrorBadJSON
	} else if ok && now.Add(skew).Before(time.Unix(nbf, 0)) {
		return JwtNotYetValid
	}
	if exp, ok, good := sec("exp"); !good {
		return JwtPayloadParseErrorBadJSON
	} else if ok && now.Add(-skew).After(time.Unix(exp, 0)) {
		return JwtExpired
	}
	return OK
}

// audienceAllowed reports whether one of the token's audiences is
// allowed, ignoring an http(s):// scheme and a trailing slash on both
// sides, as Envoy's JwksData::areAudiencesAllowed does.
func audienceAllowed(tokenAud, allowed []string) bool {
	norm := func(s string) string {
		s = strings.TrimPrefix(strings.TrimPrefix(s, "http://"), "https://")
		return strings.TrimSuffix(s, "/")
	}
	for _, a := range tokenAud {
		for _, b := range allowed {
			if norm(a) == norm(b) {
				return true
			}
		}
	}
	return false
}
