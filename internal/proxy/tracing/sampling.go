package tracing

import "math/rand/v2"

// Sampling is an HCM's tracing percentages, each in ten-thousandths
// (Envoy turns a Percent into a FractionalPercent over TEN_THOUSAND,
// rounded): random_sampling picks requests nobody asked to trace,
// client_sampling honours x-client-trace-id, overall_sampling caps
// them all. Envoy's defaults are 100 % each.
type Sampling struct {
	Client, Random, Overall uint32
}

// DefaultSampling is Envoy's: 100 % of each.
var DefaultSampling = Sampling{Client: 10000, Random: 10000, Overall: 10000}

// RequestIDOptions is the UUID request id extension's config.
type RequestIDOptions struct {
	// PackTraceReason writes the decision into x-request-id (default on).
	PackTraceReason bool
	// UseForSampling draws random_sampling and overall_sampling from the
	// request id (so every hop draws the same), not at random (default on).
	UseForSampling bool
}

// DefaultRequestID is the extension's defaults (also what Envoy uses
// without a request_id_extension).
var DefaultRequestID = RequestIDOptions{PackTraceReason: true, UseForSampling: true}

// decide is Envoy's ConnectionManagerUtility::mutateTracingRequestHeader
// and TracerUtility::shouldTraceRequest: the trace reason of the request
// whose x-request-id is id (already packed by an earlier hop, or drawn
// here), and the id to send on (with the reason packed when
// PackTraceReason). clientTraceID and forceTrace report x-client-trace-id
// and x-envoy-force-trace.
func (s Sampling) decide(o RequestIDOptions, id string, clientTraceID, forceTrace bool) (Reason, string) {
	var draw uint64
	if o.UseForSampling {
		v, ok := requestIDInteger(id)
		if !ok {
			return ReasonNone, id // Envoy skips a corrupt request id
		}
		draw = v % 10000
	} else {
		draw = rand.Uint64N(10000)
	}
	r := ReasonNone
	if o.PackTraceReason {
		r = traceReason(id)
	}
	if r == ReasonNone {
		switch {
		case clientTraceID && rand.Uint32N(10000) < s.Client:
			r = ReasonClient
		case forceTrace:
			r = ReasonForced
		case draw < uint64(s.Random):
			r = ReasonSampling
		}
	}
	if draw >= uint64(s.Overall) {
		r = ReasonNone
	}
	if o.PackTraceReason {
		id = withTraceReason(id, r)
	}
	return r, id
}
