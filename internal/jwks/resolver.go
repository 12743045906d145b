// Package jwks is straitd's JWKS resolver: it fetches the key set of a
// RequestAuthentication jwtRule (its jwksUri, or the issuer's OpenID
// discovery document when there is none), caches it, refreshes it, and
// asks for a push when a refresh changes it, so that proxies get the keys
// inline in their jwt_authn config, as istiod does by default
// (pilot/pkg/model/jwks_resolver.go, PILOT_JWT_ENABLE_REMOTE_JWKS=false).
// A key set that cannot be had is replaced by FailClosed, so tokens are
// refused rather than let through.
package jwks

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// FailClosed is the JWKS inlined when a jwtRule's keys cannot be fetched:
// one RSA public key whose private key was discarded when it was made, so
// no token verifies against it (Istio's PublicOnlyJwks does the same).
const FailClosed = `{"keys":[{"kty":"RSA","e":"AQAB","kid":"strait-fail-closed","n":"h282O8EX4Z2rN4IqjqRJcHQJSjVfFBvVxR426xuCjhMatvMt45SkGtXoCZLgJ8nM663HqDKOI7QLJcWd-fajmwwrk6otrXp0ij-a9JQZQqonpK-wSfVRdRhKt9UU-u2yl-gVTGYSU0LM1bY7vOedVuK9tue3o5JZhvu3vhxEKmk0GkZnolAFQ_eGKL65jEpITiufPf9-yMa5-fPiaOn6HInFzmThRyIC8bFuqZSFxmIxMt2-aiAnoBNch_xPlODLJoitXgSui5NB-LO5zXj15KR7MeGdodsbypJCXaHVggRgOqA0sQa5i6U9mkAnYsBK-6Ksgb6klximl77YohcYtQ"}]}`

// Defaults, as istiod's (PILOT_JWT_PUB_KEY_REFRESH_INTERVAL,
// JwtPubKeyRefreshIntervalOnFailure, JwtPubKeyEvictionDuration).
const (
	DefaultRefreshInterval        = 20 * time.Minute
	DefaultFailureRefreshInterval = time.Minute
	DefaultEviction               = 7 * 24 * time.Hour
	DefaultTimeout                = 5 * time.Second
	maxBody                       = 1 << 20
)

// Options configure a Resolver.
type Options struct {
	// Client fetches the documents; nil is a client of its own.
	Client *http.Client
	// RefreshInterval re-fetches a key set this long after it was last
	// fetched; FailureRefreshInterval retries one that could not be
	// fetched. Zero means the defaults.
	RefreshInterval, FailureRefreshInterval time.Duration
	// OnChange is called (on Run's goroutine) after a refresh changed a
	// key set or got one that had failed: the proxies need a push.
	OnChange func()
	// Logger: nil discards.
	Logger *slog.Logger
}

// Resolver fetches and caches key sets. Lookup is safe for concurrent
// use; Run refreshes them.
type Resolver struct {
	opts   Options
	log    *slog.Logger
	client *http.Client
	poke   chan struct{} // a failed first fetch asks Run to retry soon

	mu      sync.Mutex // guards entries
	entries map[key]*entry
}

type key struct{ issuer, uri string }

type entry struct {
	jwks        string // empty: the last fetch failed
	fetched     time.Time
	used        time.Time
	timeout     time.Duration
	lastFailure time.Time
}

// New returns a Resolver.
func New(opts Options) *Resolver {
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = DefaultRefreshInterval
	}
	if opts.FailureRefreshInterval <= 0 {
		opts.FailureRefreshInterval = DefaultFailureRefreshInterval
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{}
	}
	return &Resolver{opts: opts, log: log.With("component", "jwks"), client: client,
		poke: make(chan struct{}, 1), entries: map[key]*entry{}}
}

// Lookup returns the key set of a jwtRule: the cached one, else one
// fetched now (within timeout; zero is DefaultTimeout) from uri, or from
// the jwks_uri of issuer's OpenID discovery document when uri is empty.
// An error means there is none: the caller inlines FailClosed. A failed
// fetch is retried by Run.
func (r *Resolver) Lookup(ctx context.Context, issuer, uri string, timeout time.Duration) (string, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	k := key{issuer: issuer, uri: uri}
	now := time.Now()
	r.mu.Lock()
	if e, ok := r.entries[k]; ok {
		e.used, e.timeout = now, timeout
		s := e.jwks
		r.mu.Unlock()
		if s == "" {
			return "", fmt.Errorf("jwks for issuer %q (%s) could not be fetched", issuer, uri)
		}
		return s, nil
	}
	r.mu.Unlock()
	s, err := r.fetch(ctx, k, timeout)
	e := &entry{jwks: s, fetched: now, used: now, timeout: timeout}
	if err != nil {
		e.lastFailure = now
		r.log.Warn("jwks fetch failed: tokens of this issuer are refused until it succeeds", "issuer", issuer, "jwks_uri", uri, "error", err)
		select {
		case r.poke <- struct{}{}:
		default:
		}
	}
	r.mu.Lock()
	if _, ok := r.entries[k]; !ok { // a concurrent Lookup may have stored it
		r.entries[k] = e
	}
	r.mu.Unlock()
	return s, err
}

// Run refreshes the cached key sets until ctx is done: a failed one every
// FailureRefreshInterval, the others every RefreshInterval; one unused for
// DefaultEviction is forgotten.
func (r *Resolver) Run(ctx context.Context) error {
	t := time.NewTimer(r.opts.FailureRefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.poke:
			// Give the failed fetch a short pause before its retry.
			t.Reset(min(r.opts.FailureRefreshInterval, time.Second))
			continue
		case <-t.C:
		}
		if r.refresh(ctx) && r.opts.OnChange != nil {
			r.opts.OnChange()
		}
		t.Reset(r.opts.FailureRefreshInterval)
	}
}

// refresh re-fetches what is due and reports whether a key set changed.
func (r *Resolver) refresh(ctx context.Context) bool {
	now := time.Now()
	type due struct {
		k       key
		timeout time.Duration
	}
	var todo []due
	r.mu.Lock()
	for k, e := range r.entries {
		switch {
		case now.Sub(e.used) > DefaultEviction:
			delete(r.entries, k)
		case e.jwks == "" || now.Sub(e.fetched) >= r.opts.RefreshInterval:
			todo = append(todo, due{k, e.timeout})
		}
	}
	r.mu.Unlock()
	changed := false
	for _, d := range todo {
		s, err := r.fetch(ctx, d.k, d.timeout)
		r.mu.Lock()
		e := r.entries[d.k]
		if e == nil {
			r.mu.Unlock()
			continue
		}
		if err != nil {
			// Keep the last good key set, as istiod does, until eviction.
			e.lastFailure = now
			r.mu.Unlock()
			r.log.Warn("jwks refresh failed", "issuer", d.k.issuer, "jwks_uri", d.k.uri, "error", err)
			continue
		}
		if s != e.jwks {
			changed = true
		}
		e.jwks, e.fetched = s, now
		r.mu.Unlock()
	}
	return changed
}

// fetch gets a key set: the jwksUri, or the discovery document's jwks_uri.
func (r *Resolver) fetch(ctx context.Context, k key, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	uri := k.uri
	if uri == "" {
		if k.issuer == "" {
			return "", fmt.Errorf("a jwtRule needs a jwksUri or an issuer")
		}
		doc, err := r.get(ctx, strings.TrimSuffix(k.issuer, "/")+"/.well-known/openid-configuration")
		if err != nil {
			return "", fmt.Errorf("openid discovery: %w", err)
		}
		var d struct {
			JwksURI string `json:"jwks_uri"`
		}
		if err := json.Unmarshal(doc, &d); err != nil || d.JwksURI == "" {
			return "", fmt.Errorf("openid discovery document of %q has no jwks_uri", k.issuer)
		}
		uri = d.JwksURI
	}
	body, err := r.get(ctx, uri)
	if err != nil {
		return "", err
	}
	if err := validate(body); err != nil {
		return "", fmt.Errorf("%s: %w", uri, err)
	}
	return string(body), nil
}

func (r *Resolver) get(ctx context.Context, uri string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", uri, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", uri, resp.StatusCode)
	}
	if len(body) > maxBody {
		return nil, fmt.Errorf("GET %s: more than %d bytes", uri, maxBody)
	}
	return body, nil
}

// validate accepts a JSON object with a "keys" array, so that whatever a
// jwksUri answers is not inlined into proxies' config as it is.
func validate(body []byte) error {
	var doc struct {
		Keys *[]json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("not a JWKS (JSON with a keys array): %w", err)
	}
	if doc.Keys == nil {
		return fmt.Errorf("not a JWKS: no keys array")
	}
	return nil
}
