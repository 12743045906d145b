package fault

import (
	"strings"
	"testing"

	faultcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/fieldtest"
)

// TestFaultFieldsClassified: every field of the fault filter's messages is
// honoured or refused, so that a newer API's field is noticed here.
func TestFaultFieldsClassified(t *testing.T) {
	fieldtest.Classified(t, (&faultv3.HTTPFault{}).ProtoReflect().Descriptor(), httpFaultHonoured, httpFaultRefused)
	fieldtest.Classified(t, (&faultcommonv3.FaultDelay{}).ProtoReflect().Descriptor(), faultDelayHonoured, map[protoreflect.Name]string{})
	fieldtest.Classified(t, (&faultv3.FaultAbort{}).ProtoReflect().Descriptor(), faultAbortHonoured, faultAbortRefused)
}

// TestFaultRefusedFields: each refused field, set, is an error naming it.
func TestFaultRefusedFields(t *testing.T) {
	delay := func() *faultcommonv3.FaultDelay {
		return &faultcommonv3.FaultDelay{FaultDelaySecifier: &faultcommonv3.FaultDelay_FixedDelay{FixedDelay: durationpb.New(1)}}
	}
	abort := func() *faultv3.FaultAbort {
		return &faultv3.FaultAbort{ErrorType: &faultv3.FaultAbort_HttpStatus{HttpStatus: 503}}
	}
	if _, err := Build(&faultv3.HTTPFault{Delay: delay(), Abort: abort(), DisableDownstreamClusterStats: true, DelayPercentRuntime: "k"}); err != nil {
		t.Fatal(err)
	}
	fields := (&faultv3.HTTPFault{}).ProtoReflect().Descriptor().Fields()
	for n := range httpFaultRefused {
		m := &faultv3.HTTPFault{Delay: delay()}
		fieldtest.SetSomething(m.ProtoReflect(), fields.ByName(n))
		if _, err := Build(m); err == nil || !strings.Contains(err.Error(), string(n)) {
			t.Errorf("%s: got %v, want an error naming it", n, err)
		}
	}
	a := abort()
	a.ResponseBody = "b"
	if _, err := Build(&faultv3.HTTPFault{Abort: a}); err == nil || !strings.Contains(err.Error(), "abort.response_body") {
		t.Errorf("abort.response_body: got %v, want an error naming it", err)
	}
}
