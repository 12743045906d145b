package schema

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Every kind has a spec message of its own name, and its group; an unknown
// kind has neither.
func TestKinds(t *testing.T) {
	for _, k := range Kinds {
		spec := NewSpec(k)
		if spec == nil {
			t.Fatalf("%s: no spec", k)
		}
		if got := spec.ProtoReflect().Descriptor().Name(); got != protoreflect.Name(k) {
			t.Errorf("%s: spec is %s", k, got)
		}
		want := NetworkingGroup
		switch k {
		case AuthorizationPolicy, PeerAuthentication, RequestAuthentication:
			want = SecurityGroup
		case Telemetry:
			want = TelemetryGroup
		}
		if g := GroupOf(k); g != want {
			t.Errorf("GroupOf(%s) = %q, want %q", k, g, want)
		}
	}
	if NewSpec("WasmPlugin") != nil || GroupOf("WasmPlugin") != "" {
		t.Error("an unknown kind has a spec or a group")
	}
}
