package validate

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	security "istio.io/api/security/v1beta1"

	"github.com/straitmesh/strait/internal/istioconfig/fielderr"
)

// validateRequestAuthentication checks what Istio's validation checks
// (pkg/config/validation: ValidateRequestAuthentication, validateJwtRule):
// each rule has an issuer, a jwksUri is an http(s) URL, token locations
// and claim headers are named, an inline jwks is JSON.
func validateRequestAuthentication(el *fielderr.List, ra *security.RequestAuthentication) {
	if ra.Selector != nil {
		validateLabels(el, "spec.selector.matchLabels", ra.Selector.MatchLabels)
	}
	validateOneSelector(el, ra.Selector != nil, ra.TargetRef != nil, len(ra.TargetRefs) > 0)
	for i, r := range ra.JwtRules {
		p := fmt.Sprintf("spec.jwtRules[%d]", i)
		switch {
		case r.Issuer == "" && r.JwksUri != "":
			// Istio accepts a rule with a jwksUri and no issuer (any iss);
			// Strait keys its providers and request principals by issuer.
			el.AddErr(p+".issuer", fmt.Errorf("an empty issuer (a rule for tokens of any iss) is %w; set the iss claim of the tokens this rule accepts", fielderr.ErrNotSupported))
		case r.Issuer == "":
			el.Add(p+".issuer", "must be set (the iss claim of the tokens this rule accepts)")
		}
		for j, a := range r.Audiences {
			if a == "" {
				el.Add(fmt.Sprintf("%s.audiences[%d]", p, j), "must not be empty")
			}
		}
		if r.JwksUri != "" {
			u, err := url.Parse(r.JwksUri)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				el.Add(p+".jwksUri", "%q is not an http:// or https:// URL", r.JwksUri)
			}
		}
		if r.Jwks != "" {
			if err := checkJWKS(r.Jwks); err != nil {
				el.Add(p+".jwks", "%v", err)
			}
		}
		for j, h := range r.FromHeaders {
			if h.Name == "" {
				el.Add(fmt.Sprintf("%s.fromHeaders[%d].name", p, j), "must be set (e.g. Authorization)")
			} else if !headerNameRe.MatchString(h.Name) {
				el.Add(fmt.Sprintf("%s.fromHeaders[%d].name", p, j), "%q is not an HTTP header name", h.Name)
			}
		}
		for j, q := range r.FromParams {
			if q == "" {
				el.Add(fmt.Sprintf("%s.fromParams[%d]", p, j), "must not be empty")
			}
		}
		for j, c := range r.FromCookies {
			if c == "" {
				el.Add(fmt.Sprintf("%s.fromCookies[%d]", p, j), "must not be empty")
			}
		}
		if h := r.OutputPayloadToHeader; h != "" && !headerNameRe.MatchString(h) {
			el.Add(p+".outputPayloadToHeader", "%q is not an HTTP header name", h)
		}
		for j, c := range r.OutputClaimToHeaders {
			hp := fmt.Sprintf("%s.outputClaimToHeaders[%d]", p, j)
			if c.Header == "" || !headerNameRe.MatchString(c.Header) {
				el.Add(hp+".header", "%q is not an HTTP header name", c.Header)
			}
			if c.Claim == "" {
				el.Add(hp+".claim", "must be set (the claim whose value the header carries)")
			}
		}
	}
}

// checkJWKS is what Istio's validation (jwk.Parse) and Envoy's
// jwt_verify_lib ask of an inline key set: a JSON object with a "keys"
// array of objects that name their key type (kty).
func checkJWKS(s string) error {
	if !json.Valid([]byte(s)) {
		return errors.New("is not JSON (a JSON Web Key Set: {\"keys\": [...]})")
	}
	var set struct {
		Keys *[]json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal([]byte(s), &set); err != nil || set.Keys == nil {
		return errors.New(`is not a JSON Web Key Set: want an object with a "keys" array ({"keys": [...]})`)
	}
	for i, raw := range *set.Keys {
		var key struct {
			Kty string `json:"kty"`
		}
		if err := json.Unmarshal(raw, &key); err != nil {
			return fmt.Errorf("keys[%d] is not a JSON object (a JSON Web Key)", i)
		}
		if key.Kty == "" {
			return fmt.Errorf("keys[%d] has no kty (the key type: RSA, EC, OKP or oct)", i)
		}
	}
	return nil
}
