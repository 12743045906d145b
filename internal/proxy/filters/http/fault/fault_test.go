package fault

import (
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type headers map[string]string

func (h headers) Lookup(name string) (string, bool) { v, ok := h[name]; return v, ok }

func pct(n uint32, d typev3.FractionalPercent_DenominatorType) *typev3.FractionalPercent {
	return &typev3.FractionalPercent{Numerator: n, Denominator: d}
}

func httpAbort(status uint32, p *typev3.FractionalPercent) *faultv3.FaultAbort {
	return &faultv3.FaultAbort{ErrorType: &faultv3.FaultAbort_HttpStatus{HttpStatus: status}, Percentage: p}
}

func fixedDelay(d time.Duration, p *typev3.FractionalPercent) *faultcommonv3.FaultDelay {
	return &faultcommonv3.FaultDelay{FaultDelaySecifier: &faultcommonv3.FaultDelay_FixedDelay{FixedDelay: durationpb.New(d)}, Percentage: p}
}

func mustBuild(t *testing.T, m *faultv3.HTTPFault) *Policy {
	t.Helper()
	p, err := Build(m)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    *faultv3.HTTPFault
		h    headers
		want Decision
	}{
		{"abort 100%", &faultv3.HTTPFault{Abort: httpAbort(503, pct(100, typev3.FractionalPercent_HUNDRED))}, nil,
			Decision{Abort: true, Status: 503, GRPC: -1}},
		{"abort without percentage never fires", &faultv3.HTTPFault{Abort: httpAbort(503, nil)}, nil, Decision{}},
		{"abort 1000000 millionths", &faultv3.HTTPFault{Abort: httpAbort(429, pct(1_000_000, typev3.FractionalPercent_MILLION))}, nil,
			Decision{Abort: true, Status: 429, GRPC: -1}},
		{"grpc abort", &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{ErrorType: &faultv3.FaultAbort_GrpcStatus{GrpcStatus: 14}, Percentage: pct(100, typev3.FractionalPercent_HUNDRED)}}, nil,
			Decision{Abort: true, Status: 200, GRPC: 14}},
		{"delay and abort", &faultv3.HTTPFault{
			Delay: fixedDelay(2*time.Second, pct(100, typev3.FractionalPercent_HUNDRED)),
			Abort: httpAbort(500, pct(100, typev3.FractionalPercent_HUNDRED))}, nil,
			Decision{Delay: 2 * time.Second, Abort: true, Status: 500, GRPC: -1}},
		{"header abort needs the header", &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
			ErrorType: &faultv3.FaultAbort_HeaderAbort_{HeaderAbort: &faultv3.FaultAbort_HeaderAbort{}}, Percentage: pct(100, typev3.FractionalPercent_HUNDRED)}},
			nil, Decision{GRPC: -1}},
		{"header abort", &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
			ErrorType: &faultv3.FaultAbort_HeaderAbort_{HeaderAbort: &faultv3.FaultAbort_HeaderAbort{}}, Percentage: pct(100, typev3.FractionalPercent_HUNDRED)}},
			headers{"x-envoy-fault-abort-request": "504"}, Decision{Abort: true, Status: 504, GRPC: -1}},
		{"header abort out of range", &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
			ErrorType: &faultv3.FaultAbort_HeaderAbort_{HeaderAbort: &faultv3.FaultAbort_HeaderAbort{}}, Percentage: pct(100, typev3.FractionalPercent_HUNDRED)}},
			headers{"x-envoy-fault-abort-request": "600"}, Decision{GRPC: -1}},
		{"header grpc abort", &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
			ErrorType: &faultv3.FaultAbort_HeaderAbort_{HeaderAbort: &faultv3.FaultAbort_HeaderAbort{}}, Percentage: pct(100, typev3.FractionalPercent_HUNDRED)}},
			headers{"x-envoy-fault-abort-grpc-request": "7"}, Decision{Abort: true, Status: 200, GRPC: 7}},
		{"header percentage lowers", &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
			ErrorType: &faultv3.FaultAbort_HeaderAbort_{HeaderAbort: &faultv3.FaultAbort_HeaderAbort{}}, Percentage: pct(100, typev3.FractionalPercent_HUNDRED)}},
			headers{"x-envoy-fault-abort-request": "504", "x-envoy-fault-abort-request-percentage": "0"}, Decision{}},
		{"fault headers ignored without header config", &faultv3.HTTPFault{Abort: httpAbort(503, pct(0, typev3.FractionalPercent_HUNDRED))},
			headers{"x-envoy-fault-abort-request": "504", "x-envoy-fault-delay-request": "100"}, Decision{}},
		{"header delay", &faultv3.HTTPFault{Delay: &faultcommonv3.FaultDelay{
			FaultDelaySecifier: &faultcommonv3.FaultDelay_HeaderDelay_{HeaderDelay: &faultcommonv3.FaultDelay_HeaderDelay{}}, Percentage: pct(100, typev3.FractionalPercent_HUNDRED)}},
			headers{"x-envoy-fault-delay-request": "250"}, Decision{Delay: 250 * time.Millisecond}},
		{"header delay bad value", &faultv3.HTTPFault{Delay: &faultcommonv3.FaultDelay{
			FaultDelaySecifier: &faultcommonv3.FaultDelay_HeaderDelay_{HeaderDelay: &faultcommonv3.FaultDelay_HeaderDelay{}}, Percentage: pct(100, typev3.FractionalPercent_HUNDRED)}},
			headers{"x-envoy-fault-delay-request": "soon"}, Decision{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mustBuild(t, tc.m).Decide(tc.h)
			if !got.Abort {
				got.GRPC, tc.want.GRPC = 0, 0
			}
			if got != tc.want {
				t.Errorf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestDecidePercentage draws a 30 % abort and a 10 % delay many times: the
// shares land near their fractions (a wide band: this is chance).
func TestDecidePercentage(t *testing.T) {
	p := mustBuild(t, &faultv3.HTTPFault{
		Abort: httpAbort(503, pct(300_000, typev3.FractionalPercent_MILLION)),
		Delay: fixedDelay(time.Second, pct(1000, typev3.FractionalPercent_TEN_THOUSAND)),
	})
	const n = 20000
	aborts, delays := 0, 0
	for range n {
		d := p.Decide(headers{})
		if d.Abort {
			aborts++
		}
		if d.Delay > 0 {
			delays++
		}
	}
	if aborts < n*27/100 || aborts > n*33/100 {
		t.Errorf("%d aborts of %d, want about 30 %%", aborts, n)
	}
	if delays < n*8/100 || delays > n*12/100 {
		t.Errorf("%d delays of %d, want about 10 %%", delays, n)
	}
}

func TestNilPolicy(t *testing.T) {
	p := mustBuild(t, &faultv3.HTTPFault{})
	if p != nil {
		t.Fatalf("an empty HTTPFault is %v, want nil (Istio's filter-level config)", p)
	}
	if d := p.Decide(headers{}); d != (Decision{}) {
		t.Errorf("nil policy decided %+v", d)
	}
}

func TestDecideAllocatesNothing(t *testing.T) {
	p := mustBuild(t, &faultv3.HTTPFault{Abort: httpAbort(503, pct(0, typev3.FractionalPercent_HUNDRED))})
	h := headers{}
	if n := testing.AllocsPerRun(100, func() { p.Decide(h) }); n != 0 {
		t.Errorf("Decide allocates %v times", n)
	}
}

func TestBuildRefuses(t *testing.T) {
	s, _ := structpb.NewStruct(map[string]any{"a": "b"})
	for _, tc := range []struct {
		m    *faultv3.HTTPFault
		want string
	}{
		{&faultv3.HTTPFault{UpstreamCluster: "c"}, "upstream_cluster"},
		{&faultv3.HTTPFault{Headers: []*routev3.HeaderMatcher{{Name: "x"}}}, "headers"},
		{&faultv3.HTTPFault{DownstreamNodes: []string{"n"}}, "downstream_nodes"},
		{&faultv3.HTTPFault{MaxActiveFaults: wrapperspb.UInt32(1)}, "max_active_faults"},
		{&faultv3.HTTPFault{ResponseRateLimit: &faultcommonv3.FaultRateLimit{}}, "response_rate_limit"},
		{&faultv3.HTTPFault{FilterMetadata: s}, "filter_metadata"},
		{&faultv3.HTTPFault{Abort: httpAbort(199, nil)}, "abort.http_status"},
		{&faultv3.HTTPFault{Abort: &faultv3.FaultAbort{}}, "abort needs"},
		{&faultv3.HTTPFault{Delay: &faultcommonv3.FaultDelay{}}, "delay needs"},
		{&faultv3.HTTPFault{Delay: fixedDelay(-time.Second, nil)}, "delay.fixed_delay"},
		{&faultv3.HTTPFault{Abort: httpAbort(500, pct(1, typev3.FractionalPercent_DenominatorType(7)))}, "abort.percentage.denominator"},
	} {
		_, err := Build(tc.m)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Build(%v) = %v, want an error naming %q", tc.m, err, tc.want)
		}
	}
}

func TestParseWrongType(t *testing.T) {
	a, _ := anypb.New(&faultcommonv3.FaultDelay{})
	if _, err := Parse(a); err == nil || !strings.Contains(err.Error(), "HTTPFault") {
		t.Errorf("Parse of a FaultDelay: %v", err)
	}
}

// TestBounds pins the edges of the ranges the filter accepts: HTTP
// statuses 200 to 599 (config and header), gRPC statuses from 0, a zero
// fixed delay, and the cap on a client-chosen delay.
func TestBounds(t *testing.T) {
	for _, tc := range []struct {
		status uint32
		ok     bool
	}{{199, false}, {200, true}, {599, true}, {600, false}} {
		_, err := Build(&faultv3.HTTPFault{Abort: httpAbort(tc.status, nil)})
		if (err == nil) != tc.ok {
			t.Errorf("abort.http_status %d: %v, want ok %v", tc.status, err, tc.ok)
		}
	}
	p := mustBuild(t, &faultv3.HTTPFault{Delay: fixedDelay(0, pct(100, typev3.FractionalPercent_HUNDRED))})
	if d := p.Decide(headers{}); d.Delay != 0 || d.Abort {
		t.Errorf("zero fixed_delay: %+v", d)
	}
	header := mustBuild(t, &faultv3.HTTPFault{
		Delay: &faultcommonv3.FaultDelay{FaultDelaySecifier: &faultcommonv3.FaultDelay_HeaderDelay_{HeaderDelay: &faultcommonv3.FaultDelay_HeaderDelay{}},
			Percentage: pct(100, typev3.FractionalPercent_HUNDRED)},
		Abort: &faultv3.FaultAbort{ErrorType: &faultv3.FaultAbort_HeaderAbort_{HeaderAbort: &faultv3.FaultAbort_HeaderAbort{}},
			Percentage: pct(100, typev3.FractionalPercent_HUNDRED)},
	})
	for _, tc := range []struct {
		h      headers
		abort  bool
		status int
		grpc   int
	}{
		{headers{"x-envoy-fault-abort-request": "199"}, false, 0, 0},
		{headers{"x-envoy-fault-abort-request": "200"}, true, 200, -1},
		{headers{"x-envoy-fault-abort-request": "599"}, true, 599, -1},
		{headers{"x-envoy-fault-abort-request": "600"}, false, 0, 0},
		{headers{"x-envoy-fault-abort-grpc-request": "0"}, true, 200, 0},
		{headers{"x-envoy-fault-abort-grpc-request": "-1"}, false, 0, 0},
	} {
		d := header.Decide(tc.h)
		if d.Abort != tc.abort || (tc.abort && (d.Status != tc.status || d.GRPC != tc.grpc)) {
			t.Errorf("%v: %+v, want abort %v status %d grpc %d", tc.h, d, tc.abort, tc.status, tc.grpc)
		}
	}
	if d := header.Decide(headers{"x-envoy-fault-delay-request": "100000000000"}); d.Delay != 24*time.Hour {
		t.Errorf("a huge header delay: %v, want the 24h cap", d.Delay)
	}
	if d := header.Decide(headers{"x-envoy-fault-delay-request": "86399999"}); d.Delay != 86399999*time.Millisecond {
		t.Errorf("a header delay under the cap: %v", d.Delay)
	}
}
