// Package router holds the decisions of Envoy's router filter that every
// HTTP path of strait-proxy shares: the retry policy and its per-request
// state (conditions, back-off, per-try timeout), the x-envoy-* request
// headers that override a route's timeouts and retries, header mutations,
// path and host rewrites, and redirects. It has no I/O: the codec paths in
// package hcm ask it what to do and do it.
package router

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	// The previous_hosts predicate's config type, so that a route holding
	// it can be printed (admin /config_dump) as well as read.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	previouspriorities "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
)

// Condition is a set of Envoy retry_on conditions.
type Condition uint32

// Envoy's retry conditions (x-envoy-retry-on and x-envoy-retry-grpc-on;
// source/common/router/retry_state_impl.cc parseRetryOn/parseRetryGrpcOn).
const (
	On5xx Condition = 1 << iota
	OnGatewayError
	OnReset
	OnResetBeforeRequest
	OnConnectFailure
	OnRetriable4xx
	OnRefusedStream
	OnRetriableStatusCodes
	OnGRPCCancelled
	OnGRPCDeadlineExceeded
	OnGRPCResourceExhausted
	OnGRPCUnavailable
	OnGRPCInternal
)

var conditionNames = map[string]Condition{
	"5xx":                    On5xx,
	"gateway-error":          OnGatewayError,
	"reset":                  OnReset,
	"reset-before-request":   OnResetBeforeRequest,
	"connect-failure":        OnConnectFailure,
	"retriable-4xx":          OnRetriable4xx,
	"refused-stream":         OnRefusedStream,
	"retriable-status-codes": OnRetriableStatusCodes,
	"cancelled":              OnGRPCCancelled,
	"deadline-exceeded":      OnGRPCDeadlineExceeded,
	"resource-exhausted":     OnGRPCResourceExhausted,
	"unavailable":            OnGRPCUnavailable,
	"internal":               OnGRPCInternal,
}

// grpcConditions are the conditions x-envoy-retry-grpc-on may carry.
const grpcConditions = OnGRPCCancelled | OnGRPCDeadlineExceeded | OnGRPCResourceExhausted | OnGRPCUnavailable | OnGRPCInternal

// ParseConditions parses a comma-separated retry_on value. strict refuses
// an unknown condition (a route's config); a request header's unknown
// conditions are ignored, as Envoy ignores them.
func ParseConditions(s string, strict bool) (Condition, error) {
	var c Condition
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, ok := conditionNames[f]
		if !ok {
			if strict {
				return 0, fmt.Errorf("retry_on condition %q is not supported (want one of 5xx, gateway-error, reset, reset-before-request, connect-failure, retriable-4xx, refused-stream, retriable-status-codes, cancelled, deadline-exceeded, internal, resource-exhausted, unavailable)", f)
			}
			continue
		}
		c |= v
	}
	return c, nil
}

// Envoy's back-off defaults (RetryPolicy.retry_back_off): base 25 ms, max
// ten times the base.
const (
	DefaultBackOffBase = 25 * time.Millisecond
	maxBackOffFactor   = 10
)

// previousHostsPredicate is the only retry host predicate implemented.
const previousHostsPredicate = "envoy.retry_host_predicates.previous_hosts"

// previousPriorities is the only retry priority implemented.
const previousPriorities = "envoy.retry_priorities.previous_priorities"

// RetryPolicy is a compiled route retry_policy. Immutable.
type RetryPolicy struct {
	On            Condition
	NumRetries    uint32
	PerTryTimeout time.Duration // 0: none
	StatusCodes   []int         // retriable_status_codes
	BackOffBase   time.Duration
	BackOffMax    time.Duration
	// AvoidPreviousHosts: the previous_hosts predicate; a retry tries up to
	// HostSelectionAttempts picks for a host not tried before.
	AvoidPreviousHosts    bool
	HostSelectionAttempts int
	// PriorityUpdateFrequency is the previous_priorities retry priority's
	// update_frequency (0: no retry priority): every that many attempts,
	// the priorities attempted so far are excluded from the next picks.
	PriorityUpdateFrequency int
}

// CompileRetryPolicy compiles a route's retry_policy (nil: no retries).
// It refuses what it cannot honour, naming the field.
func CompileRetryPolicy(rp *routev3.RetryPolicy) (*RetryPolicy, error) {
	if rp == nil {
		return nil, nil
	}
	if err := fieldaudit.Only("retry_policy", rp.ProtoReflect(), retryPolicyFields); err != nil {
		return nil, err
	}
	on, err := ParseConditions(rp.GetRetryOn(), true)
	if err != nil {
		return nil, fmt.Errorf("retry_policy.retry_on: %w", err)
	}
	p := &RetryPolicy{On: on, NumRetries: 1, BackOffBase: DefaultBackOffBase, HostSelectionAttempts: 1}
	if n := rp.GetNumRetries(); n != nil {
		p.NumRetries = n.GetValue()
	}
	if d := rp.GetPerTryTimeout(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
			return nil, fmt.Errorf("retry_policy.per_try_timeout %v is not a valid duration", d)
		}
		p.PerTryTimeout = d.AsDuration()
	}
	for _, c := range rp.GetRetriableStatusCodes() {
		if c < 100 || c > 599 {
			return nil, fmt.Errorf("retry_policy.retriable_status_codes: %d is not an HTTP status code (100 to 599)", c)
		}
		p.StatusCodes = append(p.StatusCodes, int(c))
	}
	if b := rp.GetRetryBackOff(); b != nil {
		d := b.GetBaseInterval()
		if d == nil || d.CheckValid() != nil || d.AsDuration() < time.Millisecond {
			return nil, fmt.Errorf("retry_policy.retry_back_off.base_interval %v must be at least 1ms", d)
		}
		p.BackOffBase = d.AsDuration()
		if m := b.GetMaxInterval(); m != nil {
			if m.CheckValid() != nil || m.AsDuration() < p.BackOffBase {
				return nil, fmt.Errorf("retry_policy.retry_back_off.max_interval %v must be at least base_interval", m)
			}
			p.BackOffMax = m.AsDuration()
		}
	}
	if p.BackOffMax == 0 {
		p.BackOffMax = maxBackOffFactor * p.BackOffBase
	}
	for i, hp := range rp.GetRetryHostPredicate() {
		if hp.GetName() != previousHostsPredicate {
			return nil, fmt.Errorf("retry_policy.retry_host_predicate[%d] %q is not supported (only %s)", i, hp.GetName(), previousHostsPredicate)
		}
		p.AvoidPreviousHosts = true
	}
	if n := rp.GetHostSelectionRetryMaxAttempts(); n > 0 {
		p.HostSelectionAttempts = int(n)
	}
	if rpr := rp.GetRetryPriority(); rpr != nil {
		if rpr.GetName() != previousPriorities {
			return nil, fmt.Errorf("retry_policy.retry_priority %q is not supported (only %s)", rpr.GetName(), previousPriorities)
		}
		cfg := &previouspriorities.PreviousPrioritiesConfig{}
		if tc := rpr.GetTypedConfig(); tc == nil || tc.UnmarshalTo(cfg) != nil {
			return nil, fmt.Errorf("retry_policy.retry_priority: typed_config must be a %s", cfg.ProtoReflect().Descriptor().FullName())
		}
		if cfg.GetUpdateFrequency() <= 0 {
			return nil, fmt.Errorf("retry_policy.retry_priority: update_frequency %d must be above 0", cfg.GetUpdateFrequency())
		}
		p.PriorityUpdateFrequency = int(cfg.GetUpdateFrequency())
	}
	return p, nil
}

// Failure is why an attempt got no response head.
type Failure int

const (
	// FailConnect means no connection to the upstream (connect-failure).
	FailConnect Failure = iota + 1
	// FailReset means the connection or stream ended before a response head
	// (reset, and 5xx/gateway-error, which include resets).
	FailReset
	// FailRefused means an HTTP/2 stream was refused (REFUSED_STREAM).
	FailRefused
	// FailPerTryTimeout means the attempt's per-try timeout expired.
	FailPerTryTimeout
)

// Overrides are what a request's x-envoy-* headers ask of the router.
// Has* report presence.
type Overrides struct {
	Timeout          time.Duration // x-envoy-upstream-rq-timeout-ms
	HasTimeout       bool
	PerTryTimeout    time.Duration // x-envoy-upstream-rq-per-try-timeout-ms
	HasPerTryTimeout bool
	MaxRetries       uint32 // x-envoy-max-retries
	HasMaxRetries    bool
	On               Condition // x-envoy-retry-on and x-envoy-retry-grpc-on
}

// Envoy's request headers read by the router (and not forwarded).
const (
	HeaderTimeout       = "x-envoy-upstream-rq-timeout-ms"
	HeaderPerTryTimeout = "x-envoy-upstream-rq-per-try-timeout-ms"
	HeaderMaxRetries    = "x-envoy-max-retries"
	HeaderRetryOn       = "x-envoy-retry-on"
	HeaderRetryGRPCOn   = "x-envoy-retry-grpc-on"
	// HeaderAttemptCount is set by the proxy on upstream requests when the
	// virtual host asks (include_request_attempt_count).
	HeaderAttemptCount = "x-envoy-attempt-count"
)

// IsRouterHeader reports whether name (any case) is one of the request
// headers the router consumes.
func IsRouterHeader(name string) bool {
	if len(name) < 16 || !strings.EqualFold(name[:8], "x-envoy-") {
		return false
	}
	switch strings.ToLower(name) {
	case HeaderTimeout, HeaderPerTryTimeout, HeaderMaxRetries, HeaderRetryOn, HeaderRetryGRPCOn:
		return true
	}
	return false
}

// Set records one router header (name in any case); a malformed value is
// ignored, as Envoy ignores it.
func (o *Overrides) Set(name, value string) {
	ms := func() (time.Duration, bool) {
		n, err := strconv.ParseUint(strings.TrimSpace(value), 10, 32)
		return time.Duration(n) * time.Millisecond, err == nil
	}
	switch strings.ToLower(name) {
	case HeaderTimeout:
		o.Timeout, o.HasTimeout = ms()
	case HeaderPerTryTimeout:
		o.PerTryTimeout, o.HasPerTryTimeout = ms()
	case HeaderMaxRetries:
		if n, err := strconv.ParseUint(strings.TrimSpace(value), 10, 32); err == nil {
			o.MaxRetries, o.HasMaxRetries = uint32(n), true
		}
	case HeaderRetryOn:
		c, _ := ParseConditions(value, false)
		o.On |= c &^ grpcConditions
	case HeaderRetryGRPCOn:
		c, _ := ParseConditions(value, false)
		o.On |= c & grpcConditions
	}
}

// Retry is the retry state of one request. Not safe for concurrent use.
type Retry struct {
	on          Condition
	codes       []int
	left        uint32
	base, max   time.Duration
	perTry      time.Duration
	backoffStep uint
	// Retried counts the retries made.
	Retried int
	// LimitExceeded is set when an attempt's outcome was retriable but no
	// retry was left (Envoy's response flag URX).
	LimitExceeded bool
	avoidHosts    bool
	hostAttempts  int
	// The previous_priorities retry priority: update frequency (0: off),
	// the priority of each attempt so far, and the priorities excluded.
	prioFreq  int
	attempted []uint32
	excluded  []uint32
}

// NewRetry returns the retry state for a request on a route with policy p
// (nil: none) and the request's overrides. timeout is the route's global
// timeout; the result's Timeout is the one that applies (0: none).
func NewRetry(p *RetryPolicy, o *Overrides, routeTimeout time.Duration) (r Retry, timeout time.Duration) {
	timeout = routeTimeout
	if o != nil && o.HasTimeout {
		timeout = o.Timeout
	}
	if p != nil {
		r = Retry{on: p.On, codes: p.StatusCodes, left: p.NumRetries, base: p.BackOffBase, max: p.BackOffMax,
			perTry: p.PerTryTimeout, avoidHosts: p.AvoidPreviousHosts, hostAttempts: p.HostSelectionAttempts,
			prioFreq: p.PriorityUpdateFrequency}
	} else {
		r = Retry{base: DefaultBackOffBase, max: maxBackOffFactor * DefaultBackOffBase, hostAttempts: 1}
	}
	if o != nil {
		if p != nil || o.On != 0 {
			// x-envoy-max-retries counts only with a policy or retry-on
			// headers (Envoy's RetryStateImpl); its default is 1.
			if o.HasMaxRetries {
				r.left = o.MaxRetries
			} else if p == nil {
				r.left = 1
			}
		}
		r.on |= o.On
		if o.HasPerTryTimeout {
			r.perTry = o.PerTryTimeout
		}
	}
	if r.on == 0 {
		r.left = 0
	}
	// A per-try timeout at least the global one is no per-try timeout
	// (Envoy's FilterUtility::finalTimeout).
	if timeout > 0 && r.perTry >= timeout {
		r.perTry = 0
	}
	return r, timeout
}

// Enabled reports whether the request may still be retried.
func (r *Retry) Enabled() bool { return r.left > 0 }

// Active reports whether outcomes are judged at all (a policy with
// conditions), so that an exhausted one is reported (LimitExceeded).
func (r *Retry) Active() bool { return r.on != 0 }

// PerTryTimeout is the timeout of each attempt (0: none).
func (r *Retry) PerTryTimeout() time.Duration { return r.perTry }

// AvoidPreviousHosts reports the previous_hosts predicate and how many
// picks a retry may make to find a new host.
func (r *Retry) AvoidPreviousHosts() (bool, int) { return r.avoidHosts, r.hostAttempts }

// ExcludedPriorities records that an attempt went to priority last and
// returns the priorities the next attempt's pick must avoid: with the
// previous_priorities retry priority, every update_frequency attempts the
// set becomes the priorities attempted so far (Envoy's
// PreviousPrioritiesRetryPriority); nil without it.
func (r *Retry) ExcludedPriorities(last uint32) []uint32 {
	if r.prioFreq == 0 {
		return nil
	}
	r.attempted = append(r.attempted, last)
	if len(r.attempted)%r.prioFreq == 0 {
		r.excluded = r.excluded[:0]
		for _, p := range r.attempted {
			if !slices.Contains(r.excluded, p) {
				r.excluded = append(r.excluded, p)
			}
		}
	}
	return r.excluded
}

// retriableStatus reports whether a response status (and its grpc-status,
// -1 when absent) matches the conditions.
func (r *Retry) retriableStatus(status, grpcStatus int) bool {
	on := r.on
	switch {
	case on&On5xx != 0 && status >= 500 && status <= 599:
		return true
	case on&OnGatewayError != 0 && (status == 502 || status == 503 || status == 504):
		return true
	case on&OnRetriable4xx != 0 && status == 409:
		return true
	}
	if on&OnRetriableStatusCodes != 0 {
		for _, c := range r.codes {
			if c == status {
				return true
			}
		}
	}
	switch grpcStatus {
	case 1:
		return on&OnGRPCCancelled != 0
	case 4:
		return on&OnGRPCDeadlineExceeded != 0
	case 8:
		return on&OnGRPCResourceExhausted != 0
	case 13:
		return on&OnGRPCInternal != 0
	case 14:
		return on&OnGRPCUnavailable != 0
	}
	return false
}

// retriableFailure reports whether an attempt that failed this way matches
// the conditions. sent reports whether any request byte reached the
// upstream connection.
func (r *Retry) retriableFailure(f Failure, sent bool) bool {
	on := r.on
	if on&(On5xx|OnGatewayError|OnReset) != 0 {
		return true
	}
	if on&OnResetBeforeRequest != 0 && !sent {
		return true
	}
	switch f {
	case FailConnect:
		return on&OnConnectFailure != 0
	case FailRefused:
		return on&OnRefusedStream != 0
	}
	return false
}

// OnStatus decides after a response head: true means discard this response
// and retry (after BackOff). replayable says whether the request can be
// sent again (its body is buffered).
func (r *Retry) OnStatus(status, grpcStatus int, replayable bool) bool {
	if !r.retriableStatus(status, grpcStatus) {
		return false
	}
	return r.take(replayable)
}

// OnFailure decides after an attempt that got no response head.
func (r *Retry) OnFailure(f Failure, sent, replayable bool) bool {
	if !r.retriableFailure(f, sent) {
		return false
	}
	return r.take(replayable)
}

func (r *Retry) take(replayable bool) bool {
	if r.left == 0 {
		if r.on != 0 {
			r.LimitExceeded = true
		}
		return false
	}
	if !replayable {
		return false
	}
	r.left--
	r.Retried++
	return true
}

// BackOff is the wait before the next retry: Envoy's jittered exponential
// back-off (JitteredExponentialBackOffStrategy), uniform in
// [0, (2^n - 1) * base) for the n-th retry, at most max.
func (r *Retry) BackOff() time.Duration {
	r.backoffStep++
	step := min(r.backoffStep, 30)
	span := time.Duration((uint64(1)<<step)-1) * r.base
	if span <= 0 || span > r.max {
		span = r.max
	}
	if span <= 0 {
		return 0
	}
	return min(time.Duration(rand.Int64N(int64(span))), r.max)
}
