package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/straitmesh/strait/internal/xds"
)

// pushSettings are the push pipeline's settings read from the environment
// (Istio's variable names and defaults).
type pushSettings struct {
	DebounceAfter     time.Duration // PILOT_DEBOUNCE_AFTER
	DebounceMax       time.Duration // PILOT_DEBOUNCE_MAX
	EnableEDSDebounce bool          // PILOT_ENABLE_EDS_DEBOUNCE
	PushThrottle      int           // PILOT_PUSH_THROTTLE
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
	if v, ok := get("PILOT_ENABLE_EDS_DEBOUNCE"); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("environment variable PILOT_ENABLE_EDS_DEBOUNCE=%q is not a boolean (\"true\" or \"false\")", v)
		}
		s.EnableEDSDebounce = b
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
