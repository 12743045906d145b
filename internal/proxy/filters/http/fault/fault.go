// Package fault is the envoy.filters.http.fault HTTP filter: it delays a
// request before it is forwarded and aborts it with a local reply, each on
// a fraction of requests, as Envoy's fault filter does
// (source/extensions/filters/http/fault/fault_filter.cc). Faults controlled
// by request headers (x-envoy-fault-*) apply only when the config asks for
// them (header_delay, header_abort).
package fault

import (
	"fmt"
	"strconv"
	"time"

	faultcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// Name is the HTTP filter name.
const Name = "envoy.filters.http.fault"

// Response flags Envoy sets for an injected delay and abort.
const (
	FlagDelay = "DI"
	FlagAbort = "FI"
)

// AbortBody is the body of an abort's local reply, as Envoy's.
const AbortBody = "fault filter abort"

// Request headers that control header faults (Envoy's
// filters/common/fault HeaderNames).
const (
	headerDelay         = "x-envoy-fault-delay-request"
	headerDelayPercent  = "x-envoy-fault-delay-request-percentage"
	headerAbort         = "x-envoy-fault-abort-request"
	headerAbortGRPC     = "x-envoy-fault-abort-grpc-request"
	headerAbortPercent  = "x-envoy-fault-abort-request-percentage"
	maxHeaderDelayValue = 24 * time.Hour // bounds a client-chosen delay
)

// Policy is a compiled HTTPFault. It is immutable and safe for concurrent
// use. A nil *Policy injects nothing.
type Policy struct {
	delay *delay
	abort *abort
}

type delay struct {
	fixed  time.Duration // fixed_delay; unused when header
	header bool          // header_delay: the duration comes from the request
	pct    httpfilter.Fraction
}

type abort struct {
	status int // http_status; 0 with grpc set
	grpc   int // grpc_status; -1 when not set
	header bool
	pct    httpfilter.Fraction
}

// Decision is what the filter does to one request. The zero value lets it
// through untouched.
type Decision struct {
	// Delay, when positive, holds the request this long before anything
	// else (response flag DI).
	Delay time.Duration
	// Abort answers the request locally after the delay (flag FI): HTTP
	// Status, or, when GRPC >= 0, gRPC status GRPC (HTTP 200 and the
	// status in gRPC's trailers-only form for a gRPC request).
	Abort  bool
	Status int
	GRPC   int
}

// Parse decodes a typed_config or typed_per_filter_config Any holding an
// HTTPFault.
func Parse(a *anypb.Any) (*Policy, error) {
	var m faultv3.HTTPFault
	if err := a.UnmarshalTo(&m); err != nil {
		return nil, fmt.Errorf("%s: typed config %s is not envoy.extensions.filters.http.fault.v3.HTTPFault: %w", Name, a.GetTypeUrl(), err)
	}
	return Build(&m)
}

// Build compiles an HTTPFault. Fields the filter does not implement are
// refused by name; the *_runtime keys are accepted because Strait has no
// runtime layer to override the configured values, which is what Envoy
// does when those keys are absent from its runtime. An HTTPFault with
// neither delay nor abort (Istio's filter-level config) is a nil Policy.
func Build(m *faultv3.HTTPFault) (*Policy, error) {
	if err := fieldaudit.Check(Name, m.ProtoReflect(), httpFaultHonoured, httpFaultRefused); err != nil { // fields.go
		return nil, err
	}
	p := &Policy{}
	if d := m.GetDelay(); d != nil {
		pd, err := buildDelay(d)
		if err != nil {
			return nil, err
		}
		p.delay = pd
	}
	if a := m.GetAbort(); a != nil {
		pa, err := buildAbort(a)
		if err != nil {
			return nil, err
		}
		p.abort = pa
	}
	if p.delay == nil && p.abort == nil {
		return nil, nil
	}
	return p, nil
}

func buildDelay(d *faultcommonv3.FaultDelay) (*delay, error) {
	if err := fieldaudit.Check(Name+": delay", d.ProtoReflect(), faultDelayHonoured, nil); err != nil {
		return nil, err
	}
	pct, err := httpfilter.ParseFraction(Name+": delay.percentage", d.GetPercentage())
	if err != nil {
		return nil, err
	}
	out := &delay{pct: pct}
	switch s := d.GetFaultDelaySecifier().(type) {
	case *faultcommonv3.FaultDelay_FixedDelay:
		fd := s.FixedDelay
		if err := fd.CheckValid(); err != nil || fd.AsDuration() < 0 {
			return nil, fmt.Errorf("%s: delay.fixed_delay %v is not a valid duration", Name, fd)
		}
		out.fixed = fd.AsDuration()
	case *faultcommonv3.FaultDelay_HeaderDelay_:
		out.header = true
	default:
		return nil, fmt.Errorf("%s: delay needs fixed_delay or header_delay", Name)
	}
	return out, nil
}

func buildAbort(a *faultv3.FaultAbort) (*abort, error) {
	if err := fieldaudit.Check(Name+": abort", a.ProtoReflect(), faultAbortHonoured, faultAbortRefused); err != nil {
		return nil, err
	}
	pct, err := httpfilter.ParseFraction(Name+": abort.percentage", a.GetPercentage())
	if err != nil {
		return nil, err
	}
	out := &abort{pct: pct, grpc: -1}
	switch e := a.GetErrorType().(type) {
	case *faultv3.FaultAbort_HttpStatus:
		if e.HttpStatus < 200 || e.HttpStatus >= 600 {
			return nil, fmt.Errorf("%s: abort.http_status %d is out of range (200 to 599)", Name, e.HttpStatus)
		}
		out.status = int(e.HttpStatus)
	case *faultv3.FaultAbort_GrpcStatus:
		out.status, out.grpc = 200, int(e.GrpcStatus)
	case *faultv3.FaultAbort_HeaderAbort_:
		out.header = true
	default:
		return nil, fmt.Errorf("%s: abort needs http_status, grpc_status or header_abort", Name)
	}
	return out, nil
}

// Decide draws this request's faults. It allocates nothing.
func (p *Policy) Decide(h httpfilter.Headers) Decision {
	var d Decision
	if p == nil {
		return d
	}
	if pd := p.delay; pd != nil && headerPercent(pd.header, pd.pct, h, headerDelayPercent).Hit() {
		d.Delay = pd.duration(h)
	}
	if pa := p.abort; pa != nil && headerPercent(pa.header, pa.pct, h, headerAbortPercent).Hit() {
		d.Status, d.GRPC, d.Abort = pa.status, pa.grpc, true
		if pa.header {
			d.Status, d.GRPC, d.Abort = headerAbortStatus(h)
		}
	}
	return d
}

// headerPercent is the configured fraction, lowered (never raised) by the
// request's percentage header when the fault is header-controlled, as
// Envoy's FaultDelayConfig/FaultAbortConfig percentage() do.
func headerPercent(header bool, pct httpfilter.Fraction, h httpfilter.Headers, name string) httpfilter.Fraction {
	if !header {
		return pct
	}
	v, ok := h.Lookup(name)
	if !ok {
		return pct
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return pct
	}
	if uint32(n) < pct.Num {
		pct.Num = uint32(n)
	}
	return pct
}

func (d *delay) duration(h httpfilter.Headers) time.Duration {
	if !d.header {
		return d.fixed
	}
	v, ok := h.Lookup(headerDelay)
	if !ok {
		return 0
	}
	ms, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0
	}
	if t := time.Duration(ms) * time.Millisecond; ms < uint64(maxHeaderDelayValue/time.Millisecond) {
		return t
	}
	return maxHeaderDelayValue
}

// headerAbortStatus reads x-envoy-fault-abort-request (an HTTP status from
// 200 to 599) or x-envoy-fault-abort-grpc-request (a gRPC status); without
// a valid one there is no abort.
func headerAbortStatus(h httpfilter.Headers) (status, grpc int, ok bool) {
	if v, found := h.Lookup(headerAbort); found {
		if n, err := strconv.Atoi(v); err == nil && n >= 200 && n < 600 {
			return n, -1, true
		}
	}
	if v, found := h.Lookup(headerAbortGRPC); found {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			return 200, n, true
		}
	}
	return 0, -1, false
}
