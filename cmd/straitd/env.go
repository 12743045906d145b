package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/straitmesh/strait/internal/jwks"
	"github.com/straitmesh/strait/internal/xds"
)

// pushSettings are the push pipeline's settings read from the environment
// (Istio's variable names and defaults, plus Strait's own).
type pushSettings struct {
	DebounceAfter     time.Duration // PILOT_DEBOUNCE_AFTER
	DebounceMax       time.Duration // PILOT_DEBOUNCE_MAX
	EnableEDSDebounce bool          // PILOT_ENABLE_EDS_DEBOUNCE
	PushThrottle      int           // PILOT_PUSH_THROTTLE
	// EDSLeadingEdge pushes an endpoints-only change that arrives after a
	// quiet period at once instead of after PILOT_DEBOUNCE_AFTER; changes
	// that follow within the quiet period are debounced as in Istio
	// (STRAIT_EDS_LEADING_EDGE, default true).
	EDSLeadingEdge bool
	// JWKSRefreshInterval is how often straitd re-fetches the key sets
	// of jwtRules (PILOT_JWT_PUB_KEY_REFRESH_INTERVAL, default 20m).
	JWKSRefreshInterval time.Duration
}

// pushSettingsFromEnv reads the push settings through lookup (os.LookupEnv
// in main); unset or empty variables keep their defaults. The error names
// the variable, its value and what is expected.
func pushSettingsFromEnv(lookup func(string) (string, bool)) (pushSettings, error) {
	s := pushSettings{
		DebounceAfter:     xds.DefaultDebounceAfter,
		DebounceMax:       xds.DefaultDebounceMax,
		EnableEDSDebounce: true,
		PushThrottle:      xds.DefaultPushThrottle(),
		EDSLeadingEdge:    true,

		JWKSRefreshInterval: jwks.DefaultRefreshInterval,
	}
	get := func(name string) (string, bool) {
		v, ok := lookup(name)
		v = strings.TrimSpace(v)
		return v, ok && v != ""
	}
	duration := func(name string, dst *time.Duration) error {
		v, ok := get(name)
		if !ok {
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("environment variable %s=%q is not a positive duration (e.g. \"100ms\", \"10s\")", name, v)
		}
		*dst = d
		return nil
	}
	if err := duration("PILOT_DEBOUNCE_AFTER", &s.DebounceAfter); err != nil {
		return s, err
	}
	if err := duration("PILOT_DEBOUNCE_MAX", &s.DebounceMax); err != nil {
		return s, err
	}
	if err := duration("PILOT_JWT_PUB_KEY_REFRESH_INTERVAL", &s.JWKSRefreshInterval); err != nil {
		return s, err
	}
	// Istio's PILOT_JWT_ENABLE_REMOTE_JWKS: straitd always fetches the
	// key sets itself and inlines them (istiod's default, "false" or
	// "istiod"); having the proxies fetch them is not implemented.
	if v, ok := get("PILOT_JWT_ENABLE_REMOTE_JWKS"); ok && !strings.EqualFold(v, "false") && !strings.EqualFold(v, "istiod") {
		return s, fmt.Errorf("environment variable PILOT_JWT_ENABLE_REMOTE_JWKS=%q is not supported by Strait: only \"false\" or \"istiod\" (straitd fetches the JWKS and inlines it)", v)
	}
	boolean := func(name string, dst *bool) error {
		v, ok := get(name)
		if !ok {
			return nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("environment variable %s=%q is not a boolean (\"true\" or \"false\")", name, v)
		}
		*dst = b
		return nil
	}
	if err := boolean("PILOT_ENABLE_EDS_DEBOUNCE", &s.EnableEDSDebounce); err != nil {
		return s, err
	}
	if err := boolean("STRAIT_EDS_LEADING_EDGE", &s.EDSLeadingEdge); err != nil {
		return s, err
	}
	if v, ok := get("PILOT_PUSH_THROTTLE"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return s, fmt.Errorf("environment variable PILOT_PUSH_THROTTLE=%q is not a positive integer (concurrent pushes, e.g. \"100\")", v)
		}
		s.PushThrottle = n
	}
	if s.DebounceMax < s.DebounceAfter {
		return s, fmt.Errorf("environment variable PILOT_DEBOUNCE_MAX=%v is shorter than PILOT_DEBOUNCE_AFTER=%v; the maximum wait must be at least the quiet period", s.DebounceMax, s.DebounceAfter)
	}
	return s, nil
}
