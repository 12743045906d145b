// Package jwtauthn is the envoy.filters.http.jwt_authn HTTP filter: it
// finds JSON Web Tokens in a request (headers with a value prefix, query
// parameters, cookies), verifies them against a provider's JWKS, issuer,
// audiences and time limits, and decides with the config's requirements
// (provider, requires_any, requires_all, allow_missing...) whether the
// request goes on. It follows Envoy's filter
// (source/extensions/filters/http/jwt_authn: authenticator.cc, verifier.cc,
// extractor.cc) and its failure answers: 401 with the status text as the
// body ("Jwt is expired", "Jwt verification fails"...), 403 for
// audiences. Only inline JWKS (local_jwks) is read: Istio's default has
// istiod fetch a jwksUri and inline it, and so does straitd.
//
// A verified token's payload goes to the request's dynamic metadata under
// this filter's name (payload_in_metadata), and its principal, audiences,
// presenter and claims under "istio_authn", the keys Strait's RBAC filter
// reads (what Istio's authn filter wrote after jwt_authn, in
// istio/proxy's src/envoy/http/authn).
package jwtauthn

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// Name is the HTTP filter name.
const Name = "envoy.filters.http.jwt_authn"

// defaultClockSkew is clock_skew_seconds when unset (Envoy's default).
const defaultClockSkew = 60 * time.Second

// Filter is a compiled JwtAuthentication. It is immutable and safe for
// concurrent use.
type Filter struct {
	providers           map[string]*provider
	rules               []rule
	bypassCORSPreflight bool
	// locations is every place a provider looks for a token, for
	// allow_missing (a token anywhere means it is not missing).
	locations []location
	// outputHeaders are the headers the providers write, lower case:
	// every forward_payload_header and claim_to_headers header_name.
	// StripOutputHeaders removes them from every request.
	outputHeaders []string
	// now is the clock (time.Now outside tests).
	now func() time.Time
	// allowed and denied are jwt_authn.allowed and jwt_authn.denied
	// (filter.go); nil without stats.
	allowed, denied *atomic.Uint64
}

// Options changes how Parse builds a Filter.
type Options struct {
	// Now is the clock tokens are checked against; nil is time.Now.
	Now func() time.Time
}

type rule struct {
	match func(path string) bool
	req   requirement
}

// provider is a compiled JwtProvider.
type provider struct {
	name          string
	issuer        string
	audiences     []string
	keys          []key
	locations     []location
	forward       bool
	payloadHeader string
	padPayload    bool
	metadataKey   string          // payload_in_metadata
	spaceClaims   map[string]bool // normalize_payload_in_metadata
	claimHeaders  []claimHeader
	clockSkew     time.Duration
}

type claimHeader struct {
	header string
	path   []string // claim_name split on "."
}

// Parse decodes a typed_config Any holding a JwtAuthentication. A field
// the filter does not implement is an error that names it.
func Parse(a *anypb.Any, opts Options) (*Filter, error) {
	if a == nil {
		return nil, fmt.Errorf("typed_config is required (a JwtAuthentication)")
	}
	var cfg jwtv3.JwtAuthentication
	if err := a.UnmarshalTo(&cfg); err != nil {
		return nil, fmt.Errorf("typed_config: %w", err)
	}
	return Build(&cfg, opts)
}

// Build compiles cfg.
func Build(cfg *jwtv3.JwtAuthentication, opts Options) (*Filter, error) {
	f := &Filter{providers: map[string]*provider{}, bypassCORSPreflight: cfg.GetBypassCorsPreflight(), now: opts.Now}
	if f.now == nil {
		f.now = time.Now
	}
	if err := fieldaudit.Check("", cfg.ProtoReflect(), jwtAuthenticationHonoured, jwtAuthenticationRefused); err != nil { // fields.go
		return nil, err
	}
	names := make([]string, 0, len(cfg.GetProviders()))
	for name := range cfg.GetProviders() {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p, err := buildProvider(name, cfg.GetProviders()[name])
		if err != nil {
			return nil, fmt.Errorf("providers[%q].%w", name, err)
		}
		f.providers[name] = p
		for _, l := range p.locations {
			if !slices.Contains(f.locations, l) {
				f.locations = append(f.locations, l)
			}
		}
		if p.payloadHeader != "" {
			f.outputHeaders = append(f.outputHeaders, p.payloadHeader)
		}
		for _, ch := range p.claimHeaders {
			f.outputHeaders = append(f.outputHeaders, ch.header)
		}
	}
	slices.Sort(f.outputHeaders)
	f.outputHeaders = slices.Compact(f.outputHeaders)
	named := map[string]requirement{}
	for name, r := range cfg.GetRequirementMap() {
		req, err := f.buildRequirement(r)
		if err != nil {
			return nil, fmt.Errorf("requirement_map[%q]: %w", name, err)
		}
		named[name] = req
	}
	for i, r := range cfg.GetRules() {
		match, err := routeMatch(r.GetMatch())
		if err != nil {
			return nil, fmt.Errorf("rules[%d].match: %w", i, err)
		}
		var req requirement
		switch rt := r.GetRequirementType().(type) {
		case *jwtv3.RequirementRule_Requires:
			if req, err = f.buildRequirement(rt.Requires); err != nil {
				return nil, fmt.Errorf("rules[%d].requires: %w", i, err)
			}
		case *jwtv3.RequirementRule_RequirementName:
			var ok bool
			if req, ok = named[rt.RequirementName]; !ok {
				return nil, fmt.Errorf("rules[%d].requirement_name %q is not in requirement_map", i, rt.RequirementName)
			}
		case nil:
			// A rule without a requirement lets matching requests through
			// without a check (Envoy's matcher with no verifier).
		default:
			return nil, fmt.Errorf("rules[%d]: requirement type %T is not supported", i, rt)
		}
		f.rules = append(f.rules, rule{match: match, req: req})
	}
	return f, nil
}

func buildProvider(name string, p *jwtv3.JwtProvider) (*provider, error) {
	if err := fieldaudit.Check("", p.ProtoReflect(), jwtProviderHonoured, jwtProviderRefused); err != nil { // fields.go
		return nil, err
	}
	if n := p.GetNormalizePayloadInMetadata(); n != nil {
		if err := fieldaudit.Check("normalize_payload_in_metadata", n.ProtoReflect(), normalizePayloadFields, nil); err != nil {
			return nil, err
		}
	}
	for i, h := range p.GetFromHeaders() {
		if err := fieldaudit.Check(fmt.Sprintf("from_headers[%d]", i), h.ProtoReflect(), jwtHeaderFields, nil); err != nil {
			return nil, err
		}
	}
	for i, c := range p.GetClaimToHeaders() {
		if err := fieldaudit.Check(fmt.Sprintf("claim_to_headers[%d]", i), c.ProtoReflect(), claimToHeaderFields, nil); err != nil {
			return nil, err
		}
	}
	out := &provider{
		name: name, issuer: p.GetIssuer(), audiences: p.GetAudiences(), forward: p.GetForward(),
		payloadHeader: strings.ToLower(p.GetForwardPayloadHeader()), padPayload: p.GetPadForwardPayloadHeader(),
		metadataKey: p.GetPayloadInMetadata(), clockSkew: defaultClockSkew,
	}
	if s := p.GetClockSkewSeconds(); s != 0 {
		out.clockSkew = time.Duration(s) * time.Second
	}
	if n := p.GetNormalizePayloadInMetadata(); n != nil {
		out.spaceClaims = map[string]bool{}
		for _, c := range n.GetSpaceDelimitedClaims() {
			out.spaceClaims[c] = true
		}
	}
	switch src := p.GetJwksSourceSpecifier().(type) {
	case *jwtv3.JwtProvider_LocalJwks:
		var data []byte
		switch d := src.LocalJwks.GetSpecifier().(type) {
		case *corev3.DataSource_InlineString:
			data = []byte(d.InlineString)
		case *corev3.DataSource_InlineBytes:
			data = d.InlineBytes
		default:
			return nil, fmt.Errorf("local_jwks: data source %T is not supported (give inline_string or inline_bytes)", d)
		}
		// A JWKS that does not parse leaves the provider without keys:
		// its tokens fail, as in Envoy, which accepts the config and
		// fails the requests.
		out.keys, _ = parseJWKS(data)
	case *jwtv3.JwtProvider_RemoteJwks:
		return nil, fmt.Errorf("remote_jwks is not supported (inline the JWKS in local_jwks, as istiod does by default)")
	default:
		return nil, fmt.Errorf("jwks_source_specifier is required (local_jwks)")
	}
	for i, h := range p.GetFromHeaders() {
		if h.GetName() == "" {
			return nil, fmt.Errorf("from_headers[%d].name is required", i)
		}
		out.locations = append(out.locations, location{kind: inHeader, name: strings.ToLower(h.GetName()), prefix: h.GetValuePrefix()})
	}
	for _, q := range p.GetFromParams() {
		out.locations = append(out.locations, location{kind: inParam, name: q})
	}
	for _, c := range p.GetFromCookies() {
		out.locations = append(out.locations, location{kind: inCookie, name: c})
	}
	if len(out.locations) == 0 {
		// Envoy's default: Authorization: Bearer, then ?access_token=.
		out.locations = []location{
			{kind: inHeader, name: "authorization", prefix: "Bearer "},
			{kind: inParam, name: "access_token"},
		}
	}
	for i, c := range p.GetClaimToHeaders() {
		if c.GetHeaderName() == "" || c.GetClaimName() == "" {
			return nil, fmt.Errorf("claim_to_headers[%d]: header_name and claim_name are required", i)
		}
		if len(c.GetClaimPath()) > 0 {
			return nil, fmt.Errorf("claim_to_headers[%d].claim_path is not supported (use claim_name)", i)
		}
		out.claimHeaders = append(out.claimHeaders, claimHeader{header: strings.ToLower(c.GetHeaderName()), path: strings.Split(c.GetClaimName(), ".")})
	}
	return out, nil
}

// routeMatch compiles a rule's RouteMatch: prefix, path or safe_regex on
// the path, with case_sensitive; other conditions are refused.
func routeMatch(m *routev3.RouteMatch) (func(string) bool, error) {
	if m == nil {
		return nil, fmt.Errorf("is required")
	}
	switch {
	case len(m.GetHeaders()) > 0:
		return nil, fmt.Errorf("headers is not supported (match on the path only)")
	case len(m.GetQueryParameters()) > 0:
		return nil, fmt.Errorf("query_parameters is not supported (match on the path only)")
	case m.GetRuntimeFraction() != nil, m.GetGrpc() != nil, m.GetTlsContext() != nil, len(m.GetDynamicMetadata()) > 0, m.GetFilterState() != nil:
		return nil, fmt.Errorf("only prefix, path and safe_regex are supported")
	}
	fold := m.GetCaseSensitive() != nil && !m.GetCaseSensitive().GetValue()
	norm := func(s string) string {
		if fold {
			return strings.ToLower(s)
		}
		return s
	}
	switch ps := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		v := norm(ps.Prefix)
		return func(p string) bool { return strings.HasPrefix(norm(p), v) }, nil
	case *routev3.RouteMatch_Path:
		v := norm(ps.Path)
		return func(p string) bool { return norm(p) == v }, nil
	case *routev3.RouteMatch_SafeRegex:
		re, err := regexp.Compile("^(?:" + ps.SafeRegex.GetRegex() + ")$")
		if err != nil {
			return nil, fmt.Errorf("safe_regex: %w", err)
		}
		return re.MatchString, nil
	default:
		return nil, fmt.Errorf("path specifier %T is not supported (want prefix, path or safe_regex)", ps)
	}
}

// Request is what the filter reads of a request.
type Request struct {
	Method string
	Path   string // without the query
	Query  string // raw, without '?'
	// Header returns the values of a (lower-case) header name, in order.
	Header func(name string) []string
}

// Verified is one token that verified.
type Verified struct {
	provider *provider
	raw      string
	payload  string // the payload segment, base64url
	claims   map[string]any
	location location
}

// Result is the filter's decision on one request.
type Result struct {
	// Status is OK when the request goes on; otherwise the filter
	// answers it (Code, Status.String() as the body).
	Status Status
	// Verified are the tokens that verified, in the order they were
	// checked (empty when the request goes on without a token).
	Verified []Verified
}

// Code is the HTTP status of a failure: 403 for audiences, else 401.
func (r Result) Code() int {
	if r.Status == JwtAudienceNotAllowed {
		return 403
	}
	return 401
}

// Authenticate reports whether the request may go on: the requirement of
// the first rule whose match takes its path (none: it goes on).
func (f *Filter) Authenticate(r *Request) Result {
	if f.bypassCORSPreflight && r.Method == "OPTIONS" && len(r.Header("origin")) > 0 && len(r.Header("access-control-request-method")) > 0 {
		return Result{}
	}
	for i := range f.rules {
		ru := &f.rules[i]
		if !ru.match(r.Path) {
			continue
		}
		if ru.req == nil {
			return Result{}
		}
		v := &verification{f: f, r: r, now: f.now()}
		st := ru.req.verify(v)
		var res Result
		res.Status = st
		if st == OK {
			res.Verified = v.verified
		}
		return res
	}
	return Result{}
}

// Principal is "iss/sub" (Istio's request principal), empty without both.
func (v *Verified) Principal() string {
	iss, _ := v.claims["iss"].(string)
	sub, _ := v.claims["sub"].(string)
	if iss == "" || sub == "" {
		return ""
	}
	return iss + "/" + sub
}

// Claims are the token's payload claims. The map is the filter's own:
// do not modify it.
func (v *Verified) Claims() map[string]any { return v.claims }

// Audiences are the aud claim's values (a string or a list).
func (v *Verified) Audiences() []string { return stringList(v.claims["aud"]) }

// Presenter is the azp claim.
func (v *Verified) Presenter() string {
	s, _ := v.claims["azp"].(string)
	return s
}

// MetadataKey is the provider's payload_in_metadata (empty: none).
func (v *Verified) MetadataKey() string { return v.provider.metadataKey }

// MetadataPayload is the payload as it goes to the metadata: the claims,
// with the space-delimited claims (normalize_payload_in_metadata) split
// into lists.
func (v *Verified) MetadataPayload() map[string]any {
	if len(v.provider.spaceClaims) == 0 {
		return v.claims
	}
	out := make(map[string]any, len(v.claims))
	for k, val := range v.claims {
		if s, ok := val.(string); ok && v.provider.spaceClaims[k] {
			var l []any
			for _, w := range strings.Fields(s) {
				l = append(l, w)
			}
			out[k] = l
			continue
		}
		out[k] = val
	}
	return out
}

// HeaderEditor edits the request's headers.
type HeaderEditor interface {
	Del(name string)
	Add(name, value string)
}

// StripOutputHeaders removes from a request every header a provider of
// the filter writes (forward_payload_header, claim_to_headers), so that
// the application never takes a client's copy of one for the filter's.
// The codec calls it on every request before Authenticate, whatever the
// outcome: with no token, a token of another provider, a failed token
// under allow_missing_or_failed, a path no rule matches, a CORS preflight.
//
// Envoy removes the same names (ExtractorImpl::sanitizeHeaders in
// source/extensions/filters/http/jwt_authn/extractor.cc) but only for the
// providers of the verifiers that run (verifier.cc): a provider_name
// verifier its own provider's, allow_missing and allow_missing_or_failed
// every provider's, and nothing when no rule matches; a requires_any
// stops at its first child that passes, so the providers after it keep
// the client's headers. Removing them all every time costs a request
// nothing it could rely on (only the filter writes these headers) and
// closes those gaps. A header a provider reads its token from is read
// after this: a provider whose output header is another's token header
// makes that token missing, as it does in Envoy whenever the writer's
// verifier runs first.
func (f *Filter) StripOutputHeaders(e HeaderEditor) {
	for _, h := range f.outputHeaders {
		e.Del(h)
	}
}

// EditHeaders applies what the verified tokens' providers ask of the
// request's headers: the token's header removed unless forward, the
// payload header (forward_payload_header) and claim_to_headers set.
func (r Result) EditHeaders(e HeaderEditor) {
	for i := range r.Verified {
		v := &r.Verified[i]
		p := v.provider
		if !p.forward && v.location.kind == inHeader {
			e.Del(v.location.name)
		}
		if p.payloadHeader != "" {
			pl := v.payload
			if p.padPayload {
				pl += strings.Repeat("=", (4-len(pl)%4)%4)
			}
			e.Del(p.payloadHeader)
			e.Add(p.payloadHeader, pl)
		}
		for _, ch := range p.claimHeaders {
			if s, ok := claimString(v.claims, ch.path); ok {
				e.Del(ch.header)
				e.Add(ch.header, s)
			}
		}
	}
}

// claimString is the claim at path as a header value: a string, number or
// boolean, or a list of them joined with ",".
func claimString(claims map[string]any, path []string) (string, bool) {
	var cur any = claims
	for _, seg := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false
		}
		if cur, ok = m[seg]; !ok {
			return "", false
		}
	}
	switch x := cur.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		if x {
			return "true", true
		}
		return "false", true
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := claimString(map[string]any{"": e}, []string{""})
			if !ok {
				return "", false
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), true
	}
	return "", false
}

func stringList(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// providerNames lists the providers a requirement may name, for errors.
func (f *Filter) providerNames() string {
	names := make([]string, 0, len(f.providers))
	for n := range f.providers {
		names = append(names, n)
	}
	slices.SortFunc(names, cmp.Compare)
	return strings.Join(names, ", ")
}

// Metadata keys the filter writes under istio_authn after a token
// verifies: what Istio's authn filter derived from jwt_authn's payload and
// Strait's RBAC filter reads.
const (
	AuthnNamespace = "istio_authn"
	KeyPrincipal   = "request.auth.principal" // string "iss/sub"
	KeyAudiences   = "request.auth.audiences" // []string
	KeyPresenter   = "request.auth.presenter" // string
	KeyClaims      = "request.auth.claims"    // map[string]any, the payload
)

// WriteMetadata records the verified tokens in md: each payload under
// this filter's name and its provider's payload_in_metadata key, and the
// first token's identity under istio_authn (the origin Istio's authn
// filter picked: the first that verified). Without a verified token it
// writes nothing.
func (r Result) WriteMetadata(md *httpfilter.Metadata) {
	for i := range r.Verified {
		v := &r.Verified[i]
		if k := v.MetadataKey(); k != "" {
			md.Set(Name, k, v.MetadataPayload())
		}
	}
	if len(r.Verified) == 0 {
		return
	}
	v := &r.Verified[0]
	if p := v.Principal(); p != "" {
		md.Set(AuthnNamespace, KeyPrincipal, p)
	}
	if a := v.Audiences(); len(a) > 0 {
		md.Set(AuthnNamespace, KeyAudiences, a)
	}
	if p := v.Presenter(); p != "" {
		md.Set(AuthnNamespace, KeyPresenter, p)
	}
	md.Set(AuthnNamespace, KeyClaims, v.MetadataPayload())
}
