package router

import (
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func mustPolicy(t *testing.T, rp *routev3.RetryPolicy) *RetryPolicy {
	t.Helper()
	p, err := CompileRetryPolicy(rp)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRetryConditions(t *testing.T) {
	for _, tc := range []struct {
		on           string
		codes        []uint32
		status, grpc int
		want         bool
	}{
		{"5xx", nil, 500, -1, true},
		{"5xx", nil, 499, -1, false},
		{"gateway-error", nil, 503, -1, true},
		{"gateway-error", nil, 500, -1, false},
		{"retriable-4xx", nil, 409, -1, true},
		{"retriable-4xx", nil, 404, -1, false},
		{"retriable-status-codes", []uint32{418}, 418, -1, true},
		{"retriable-status-codes", []uint32{418}, 503, -1, false},
		{"connect-failure", []uint32{503}, 503, -1, false}, // codes need retriable-status-codes
		{"unavailable", nil, 200, 14, true},
		{"cancelled", nil, 200, 1, true},
		{"deadline-exceeded", nil, 200, 4, true},
		{"resource-exhausted", nil, 200, 8, true},
		{"internal", nil, 200, 13, true},
		{"internal", nil, 200, 14, false},
	} {
		r, _ := NewRetry(mustPolicy(t, &routev3.RetryPolicy{RetryOn: tc.on, RetriableStatusCodes: tc.codes}), nil, 0)
		if got := r.OnStatus(tc.status, tc.grpc, true); got != tc.want {
			t.Errorf("retry_on %q codes %v: status %d grpc %d retried %v, want %v", tc.on, tc.codes, tc.status, tc.grpc, got, tc.want)
		}
	}
	for _, tc := range []struct {
		on   string
		f    Failure
		sent bool
		want bool
	}{
		{"connect-failure", FailConnect, false, true},
		{"connect-failure", FailReset, true, false},
		{"refused-stream", FailRefused, true, true},
		{"reset", FailReset, true, true},
		{"5xx", FailPerTryTimeout, true, true},
		{"reset-before-request", FailReset, false, true},
		{"reset-before-request", FailReset, true, false},
		{"retriable-4xx", FailReset, true, false},
	} {
		r, _ := NewRetry(mustPolicy(t, &routev3.RetryPolicy{RetryOn: tc.on}), nil, 0)
		if got := r.OnFailure(tc.f, tc.sent, true); got != tc.want {
			t.Errorf("retry_on %q: failure %d sent %v retried %v, want %v", tc.on, tc.f, tc.sent, got, tc.want)
		}
	}
}

func TestRetryBudgetAndLimit(t *testing.T) {
	p := mustPolicy(t, &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(2)})
	r, _ := NewRetry(p, nil, 0)
	// Each OnStatus call takes one retry, so the two calls are not the same.
	first := r.OnStatus(500, -1, true)
	second := r.OnStatus(500, -1, true)
	if !first || !second {
		t.Fatal("two retries refused")
	}
	if r.OnStatus(500, -1, true) || !r.LimitExceeded || r.Retried != 2 {
		t.Errorf("third: retried %d limit %v, want 2 and URX", r.Retried, r.LimitExceeded)
	}
	r, _ = NewRetry(p, nil, 0)
	if r.OnStatus(500, -1, false) || r.Retried != 0 {
		t.Error("a request whose body is not replayable was retried")
	}
	// x-envoy-max-retries overrides; 0 disables.
	r, _ = NewRetry(p, &Overrides{MaxRetries: 0, HasMaxRetries: true}, 0)
	if r.Enabled() {
		t.Error("x-envoy-max-retries: 0 left retries enabled")
	}
	// Without a policy, x-envoy-max-retries alone does nothing; with
	// x-envoy-retry-on it allows one retry by default.
	r, _ = NewRetry(nil, &Overrides{MaxRetries: 3, HasMaxRetries: true}, 0)
	if r.Enabled() {
		t.Error("x-envoy-max-retries without a policy enabled retries")
	}
	var o Overrides
	o.Set("X-Envoy-Retry-On", "5xx,bogus")
	r, _ = NewRetry(nil, &o, 0)
	if !r.OnStatus(502, -1, true) || r.OnStatus(502, -1, true) {
		t.Error("x-envoy-retry-on 5xx: want exactly one retry")
	}
}

func TestTimeoutsAndOverrides(t *testing.T) {
	p := mustPolicy(t, &routev3.RetryPolicy{RetryOn: "5xx", PerTryTimeout: durationpb.New(2 * time.Second)})
	var o Overrides
	o.Set(HeaderTimeout, "300")
	r, timeout := NewRetry(p, &o, 10*time.Second)
	if timeout != 300*time.Millisecond {
		t.Errorf("timeout %v, want the header's 300ms", timeout)
	}
	if r.PerTryTimeout() != 0 {
		t.Errorf("per-try %v not below the global timeout: want it dropped", r.PerTryTimeout())
	}
	o = Overrides{}
	o.Set(HeaderPerTryTimeout, "100")
	o.Set(HeaderTimeout, "x") // malformed: ignored
	r, timeout = NewRetry(p, &o, 10*time.Second)
	if timeout != 10*time.Second || r.PerTryTimeout() != 100*time.Millisecond {
		t.Errorf("timeout %v per-try %v, want 10s and 100ms", timeout, r.PerTryTimeout())
	}
	if !IsRouterHeader("X-Envoy-Max-Retries") || IsRouterHeader("x-envoy-attempt-count") || IsRouterHeader("x-request-id") {
		t.Error("IsRouterHeader")
	}
}

func TestBackOffBounds(t *testing.T) {
	p := mustPolicy(t, &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(10)})
	for range 200 {
		r, _ := NewRetry(p, nil, 0)
		limits := []time.Duration{25, 75, 175, 250, 250, 250}
		for i, l := range limits {
			if d := r.BackOff(); d < 0 || d >= l*time.Millisecond && l != 250 || d > 250*time.Millisecond {
				t.Fatalf("retry %d: back-off %v, want in [0, %dms)", i+1, d, l)
			}
		}
	}
}

func TestCompileRefusals(t *testing.T) {
	for _, tc := range []struct {
		rp   *routev3.RetryPolicy
		want string
	}{
		{&routev3.RetryPolicy{RetryOn: "5xx,envoy-ratelimited"}, "envoy-ratelimited"},
		{&routev3.RetryPolicy{RetryOn: "5xx", RetryPriority: &routev3.RetryPolicy_RetryPriority{Name: "envoy.retry_priorities.previous_priorities"}}, "retry_policy.retry_priority"},
		{&routev3.RetryPolicy{RetryOn: "5xx", PerTryIdleTimeout: durationpb.New(time.Second)}, "retry_policy.per_try_idle_timeout"},
		{&routev3.RetryPolicy{RetryOn: "5xx", RetryHostPredicate: []*routev3.RetryPolicy_RetryHostPredicate{{Name: "envoy.retry_host_predicates.omit_canary_hosts"}}}, "omit_canary_hosts"},
		{&routev3.RetryPolicy{RetryOn: "5xx", RetriableStatusCodes: []uint32{700}}, "700"},
	} {
		if _, err := CompileRetryPolicy(tc.rp); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %q", tc.rp, err, tc.want)
		}
	}
	if _, err := CompileHeaderOps("request_headers_to_add", []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x", Value: "%DOWNSTREAM_REMOTE_ADDRESS%"}}}, nil); err == nil {
		t.Error("a substitution formatter was accepted")
	}
	if _, err := CompileHeaderOps("request_headers_to_add", nil, []string{":path"}); err == nil || !strings.Contains(err.Error(), "request_headers_to_remove[0]") {
		t.Errorf("removing :path: %v", err)
	}
}

type mapHeaders map[string][]string

func (m mapHeaders) Has(n string) bool { _, ok := m[n]; return ok }
func (m mapHeaders) Del(n string)      { delete(m, n) }
func (m mapHeaders) Add(n, v string)   { m[n] = append(m[n], v) }

func TestHeaderOps(t *testing.T) {
	opt := func(k, v string, a corev3.HeaderValueOption_HeaderAppendAction) *corev3.HeaderValueOption {
		return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v}, AppendAction: a}
	}
	ops, err := CompileHeaderOps("request_headers_to_add", []*corev3.HeaderValueOption{
		opt("X-Append", "2", corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD),
		opt("x-set", "new", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
		opt("x-absent", "a", corev3.HeaderValueOption_ADD_IF_ABSENT),
		opt("x-present", "p", corev3.HeaderValueOption_ADD_IF_ABSENT),
		opt("x-only-if", "o", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS),
		opt("x-empty", "", corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD),
		{Header: &corev3.HeaderValue{Key: "x-legacy", Value: "l"}, Append: wrapperspb.Bool(false)},
	}, []string{"X-Remove", "x-append"})
	if err != nil {
		t.Fatal(err)
	}
	h := mapHeaders{"x-append": {"1"}, "x-set": {"old"}, "x-present": {"was"}, "x-remove": {"r"}, "x-legacy": {"a", "b"}}
	ops.Apply(h)
	want := map[string]string{"x-append": "2", "x-set": "new", "x-absent": "a", "x-present": "was", "x-legacy": "l"}
	for k, v := range want {
		if got := strings.Join(h[k], ","); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	for _, k := range []string{"x-remove", "x-only-if", "x-empty"} {
		if _, ok := h[k]; ok {
			t.Errorf("%s present: %v", k, h[k])
		}
	}
}

func TestRedirectAndRewrite(t *testing.T) {
	mk := func(ra *routev3.RedirectAction) *Redirect {
		r, err := CompileRedirect(ra)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		ra   *routev3.RedirectAction
		want string
	}{
		{&routev3.RedirectAction{PathRewriteSpecifier: &routev3.RedirectAction_PathRedirect{PathRedirect: "/new"}}, "http://h:8080/new?q=1"},
		{&routev3.RedirectAction{PathRewriteSpecifier: &routev3.RedirectAction_PathRedirect{PathRedirect: "/new?x=2"}}, "http://h:8080/new?x=2"},
		{&routev3.RedirectAction{HostRedirect: "other", PortRedirect: 9}, "http://other:9/old/p?q=1"},
		{&routev3.RedirectAction{SchemeRewriteSpecifier: &routev3.RedirectAction_HttpsRedirect{HttpsRedirect: true}, StripQuery: true}, "https://h/old/p"},
		{&routev3.RedirectAction{PathRewriteSpecifier: &routev3.RedirectAction_PrefixRewrite{PrefixRewrite: "/v2/"}}, "http://h:8080/v2/p?q=1"},
	} {
		if got := mk(tc.ra).Location("http", "h:8080", "/old/p", "?q=1", len("/old/")); got != tc.want {
			t.Errorf("%v: Location %q, want %q", tc.ra, got, tc.want)
		}
	}
	if c := mk(&routev3.RedirectAction{ResponseCode: routev3.RedirectAction_PERMANENT_REDIRECT}).Code; c != 308 {
		t.Errorf("code %d, want 308", c)
	}
	rw, err := CompilePathRewrite("route", "", nil)
	if rw != nil || err != nil {
		t.Errorf("no rewrite: %v %v", rw, err)
	}
	rw, _ = CompilePathRewrite("route", "/", nil)
	if got := rw.Apply("/api/x", 5); got != "/x" {
		t.Errorf("prefix rewrite: %q", got)
	}
	rw, err = compileRegexRewrite(`^/service/([^/]+)(/.*)$`, `\2/instance/\1$`)
	if err != nil {
		t.Fatal(err)
	}
	if got := rw.Apply("/service/foo/v1/api", 0); got != "/v1/api/instance/foo$" {
		t.Errorf("regex rewrite: %q", got)
	}
}

// TestPreviousHostsPrintable: a route holding the previous_hosts predicate
// is printed by admin /config_dump, which needs its type registered.
func TestPreviousHostsPrintable(t *testing.T) {
	rp := &routev3.RetryPolicy{RetryOn: "5xx", RetryHostPredicate: []*routev3.RetryPolicy_RetryHostPredicate{{
		Name: previousHostsPredicate,
		ConfigType: &routev3.RetryPolicy_RetryHostPredicate_TypedConfig{TypedConfig: &anypb.Any{
			TypeUrl: "type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"}},
	}}}
	if _, err := protojson.Marshal(rp); err != nil {
		t.Fatalf("config dump of a retry policy: %v", err)
	}
	if p := mustPolicy(t, rp); !p.AvoidPreviousHosts {
		t.Error("previous_hosts not honoured")
	}
}

// TestCompileBoundaries: the edges of what a retry policy accepts.
func TestCompileBoundaries(t *testing.T) {
	ok := []*routev3.RetryPolicy{
		{RetryOn: "5xx", PerTryTimeout: durationpb.New(0)},
		{RetryOn: "5xx", RetriableStatusCodes: []uint32{100, 599}},
		{RetryOn: "5xx", RetryBackOff: &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(time.Millisecond), MaxInterval: durationpb.New(time.Millisecond)}},
		{RetryOn: " ,5xx,,"},
	}
	for _, rp := range ok {
		if _, err := CompileRetryPolicy(rp); err != nil {
			t.Errorf("%v refused: %v", rp, err)
		}
	}
	bad := []*routev3.RetryPolicy{
		{RetryOn: "5xx", PerTryTimeout: durationpb.New(-time.Second)},
		{RetryOn: "5xx", RetriableStatusCodes: []uint32{99}},
		{RetryOn: "5xx", RetryBackOff: &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(time.Millisecond - 1)}},
		{RetryOn: "5xx", RetryBackOff: &routev3.RetryPolicy_RetryBackOff{}},
		{RetryOn: "5xx", RetryBackOff: &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(time.Second), MaxInterval: durationpb.New(time.Second - 1)}},
	}
	for _, rp := range bad {
		if _, err := CompileRetryPolicy(rp); err == nil {
			t.Errorf("%v accepted", rp)
		}
	}
	p := mustPolicy(t, &routev3.RetryPolicy{RetryOn: " ,5xx,,"})
	if p.On != On5xx || p.NumRetries != 1 || p.BackOffBase != 25*time.Millisecond || p.BackOffMax != 250*time.Millisecond || p.AvoidPreviousHosts {
		t.Errorf("defaults: %+v, want 5xx, 1 retry, 25ms..250ms back-off", p)
	}
	p = mustPolicy(t, &routev3.RetryPolicy{RetryOn: "5xx", RetryBackOff: &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(10 * time.Millisecond)},
		RetryHostPredicate: []*routev3.RetryPolicy_RetryHostPredicate{{Name: previousHostsPredicate}}, HostSelectionRetryMaxAttempts: 5})
	if p.BackOffMax != 100*time.Millisecond {
		t.Errorf("max back-off %v, want ten times the 10ms base", p.BackOffMax)
	}
	r, _ := NewRetry(p, nil, 0)
	if avoid, n := r.AvoidPreviousHosts(); !avoid || n != 5 || !r.Active() {
		t.Errorf("previous hosts %v %d active %v, want true 5 true", avoid, n, r.Active())
	}
	// Without a policy, retries come only from the headers, with Envoy's
	// back-off.
	r, _ = NewRetry(nil, nil, 0)
	if r.Active() || r.Enabled() {
		t.Error("no policy, no headers: retries active")
	}
	var o Overrides
	o.Set("X-Envoy-Retry-Grpc-On", "unavailable,5xx")
	r, _ = NewRetry(nil, &o, 0)
	if r.OnStatus(503, -1, true) {
		t.Error("x-envoy-retry-grpc-on carried an HTTP condition")
	}
	if !r.OnStatus(200, 14, true) {
		t.Error("x-envoy-retry-grpc-on unavailable not honoured")
	}
	for range 100 {
		if d := r.BackOff(); d < 0 || d >= 250*time.Millisecond {
			t.Fatalf("header-only back-off %v outside [0, 250ms)", d)
		}
	}
	// A per-try timeout equal to the global one is none; with no global
	// timeout it stays.
	p = mustPolicy(t, &routev3.RetryPolicy{RetryOn: "5xx", PerTryTimeout: durationpb.New(time.Second)})
	if r, _ := NewRetry(p, nil, time.Second); r.PerTryTimeout() != 0 {
		t.Errorf("per-try = global: %v, want none", r.PerTryTimeout())
	}
	if r, _ := NewRetry(p, nil, 0); r.PerTryTimeout() != time.Second {
		t.Errorf("no global timeout: per-try %v, want 1s", r.PerTryTimeout())
	}
	if !IsRouterHeader("x-envoy-retry-on") || IsRouterHeader("x-envoy-retry-o") {
		t.Error("IsRouterHeader at the 16-byte edge")
	}
}

func TestHeaderAndRewriteRefusals(t *testing.T) {
	var empty *HeaderOps
	if !empty.Empty() || !(&HeaderOps{}).Empty() {
		t.Error("Empty")
	}
	if onlyRemove, _ := CompileHeaderOps("x", nil, []string{"a"}); onlyRemove.Empty() {
		t.Error("ops with only a removal are Empty")
	}
	for _, o := range []*corev3.HeaderValueOption{
		{Header: &corev3.HeaderValue{Key: "x", Value: "v"}, Append: wrapperspb.Bool(true), AppendAction: corev3.HeaderValueOption_ADD_IF_ABSENT},
		{Header: &corev3.HeaderValue{Key: "x", RawValue: []byte("v")}},
		{Header: &corev3.HeaderValue{Key: "x", Value: "v"}, AppendAction: 9},
		{Header: &corev3.HeaderValue{Key: "Host", Value: "v"}},
		{Header: &corev3.HeaderValue{Key: "", Value: "v"}},
	} {
		if _, err := CompileHeaderOps("response_headers_to_add", []*corev3.HeaderValueOption{o}, nil); err == nil || !strings.Contains(err.Error(), "response_headers_to_add[0]") {
			t.Errorf("%v: %v, want a refusal naming response_headers_to_add[0]", o, err)
		}
	}
	ops, err := CompileHeaderOps("x", []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "k", Value: ""}, KeepEmptyValue: true}}, nil)
	h := mapHeaders{}
	ops.Apply(h)
	if _, ok := h["k"]; err != nil || !ok {
		t.Errorf("keep_empty_value: %v %v", h, err)
	}
	if _, err := CompilePathRewrite("route", "/a", &matcherv3.RegexMatchAndSubstitute{}); err == nil {
		t.Error("prefix_rewrite and regex_rewrite together accepted")
	}
	if _, err := compileRegexRewrite("(", "x"); err == nil || !strings.Contains(err.Error(), "regex_rewrite.pattern") {
		t.Errorf("bad pattern: %v", err)
	}
	rw, _ := compileRegexRewrite("a", `$1\\\0`)
	if got := rw.Apply("xay", 0); got != `x$1\ay` {
		t.Errorf("substitution escapes: %q", got)
	}
	r, err := CompileRedirect(&routev3.RedirectAction{SchemeRewriteSpecifier: &routev3.RedirectAction_SchemeRedirect{SchemeRedirect: "HTTPS"}})
	if err != nil || r.Location("http", "[::1]:80", "/p", "", 0) != "https://[::1]/p" {
		t.Errorf("scheme_redirect: %v %q", err, r.Location("http", "[::1]:80", "/p", "", 0))
	}
	if got := r.Location("https", "[::1]", "/p", "", 0); got != "https://[::1]/p" {
		t.Errorf("same scheme keeps the host: %q", got)
	}
}
