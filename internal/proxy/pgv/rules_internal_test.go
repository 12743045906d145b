package pgv

import (
	"strings"
	"testing"

	"github.com/envoyproxy/protoc-gen-validate/validate"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The rules below are the boundaries of each rule the generated code
// checks, one value on each side; Envoy's protos do not use every rule
// (or every combination of bounds), so the differential test alone does
// not pin them.

// apply compiles rules for a field of type ft and checks v, returning
// the errors' text.
func apply(t *testing.T, ft fieldType, rules *validate.FieldRules, fd protoreflect.FieldDescriptor, v protoreflect.Value, has bool) []string {
	t.Helper()
	rc, err := resolve(ft, rules, fd)
	if err != nil {
		t.Fatalf("resolve %v: %v", rules, err)
	}
	rep := report{msg: "M"}
	rc.check(&rep, loc{field: "F"}, v, has, fd)
	out := make([]string, len(rep.errs))
	for i, e := range rep.errs {
		out[i] = e.Error()
	}
	return out
}

func expect(t *testing.T, name string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got  %q\n want %q", name, got, want)
	}
}

func i32(v int32) *int32 { return &v }

func TestNumberBoundaries(t *testing.T) {
	const pre = "invalid M.F: "
	type tc struct {
		r    *validate.Int32Rules
		v    int32
		want string // "" passes
	}
	cases := []tc{
		{&validate.Int32Rules{Const: i32(5)}, 5, ""},
		{&validate.Int32Rules{Const: i32(5)}, 4, "value must equal 5"},
		// lt, gt: inside (gt, lt) when lt > gt
		{&validate.Int32Rules{Gt: i32(1), Lt: i32(5)}, 1, "value must be inside range (1, 5)"},
		{&validate.Int32Rules{Gt: i32(1), Lt: i32(5)}, 2, ""},
		{&validate.Int32Rules{Gt: i32(1), Lt: i32(5)}, 4, ""},
		{&validate.Int32Rules{Gt: i32(1), Lt: i32(5)}, 5, "value must be inside range (1, 5)"},
		// outside [lt, gt] when lt <= gt
		{&validate.Int32Rules{Gt: i32(5), Lt: i32(1)}, 0, ""},
		{&validate.Int32Rules{Gt: i32(5), Lt: i32(1)}, 1, "value must be outside range [1, 5]"},
		{&validate.Int32Rules{Gt: i32(5), Lt: i32(1)}, 5, "value must be outside range [1, 5]"},
		{&validate.Int32Rules{Gt: i32(5), Lt: i32(1)}, 6, ""},
		{&validate.Int32Rules{Gt: i32(3), Lt: i32(3)}, 3, "value must be outside range [3, 3]"},
		{&validate.Int32Rules{Gt: i32(3), Lt: i32(3)}, 4, ""},
		{&validate.Int32Rules{Gt: i32(3), Lt: i32(3)}, 2, ""},
		// lt, gte: inside [gte, lt)
		{&validate.Int32Rules{Gte: i32(1), Lt: i32(5)}, 0, "value must be inside range [1, 5)"},
		{&validate.Int32Rules{Gte: i32(1), Lt: i32(5)}, 1, ""},
		{&validate.Int32Rules{Gte: i32(1), Lt: i32(5)}, 4, ""},
		{&validate.Int32Rules{Gte: i32(1), Lt: i32(5)}, 5, "value must be inside range [1, 5)"},
		// outside [lt, gte)
		{&validate.Int32Rules{Gte: i32(5), Lt: i32(1)}, 0, ""},
		{&validate.Int32Rules{Gte: i32(5), Lt: i32(1)}, 1, "value must be outside range [1, 5)"},
		{&validate.Int32Rules{Gte: i32(5), Lt: i32(1)}, 4, "value must be outside range [1, 5)"},
		{&validate.Int32Rules{Gte: i32(5), Lt: i32(1)}, 5, ""},
		{&validate.Int32Rules{Gte: i32(3), Lt: i32(3)}, 3, ""},
		{&validate.Int32Rules{Gte: i32(3), Lt: i32(3)}, 4, ""},
		{&validate.Int32Rules{Gte: i32(3), Lt: i32(3)}, 2, ""},
		{&validate.Int32Rules{Lt: i32(3)}, 2, ""},
		{&validate.Int32Rules{Lt: i32(3)}, 3, "value must be less than 3"},
		// lte, gt: inside (gt, lte]
		{&validate.Int32Rules{Gt: i32(1), Lte: i32(5)}, 1, "value must be inside range (1, 5]"},
		{&validate.Int32Rules{Gt: i32(1), Lte: i32(5)}, 2, ""},
		{&validate.Int32Rules{Gt: i32(1), Lte: i32(5)}, 5, ""},
		{&validate.Int32Rules{Gt: i32(1), Lte: i32(5)}, 6, "value must be inside range (1, 5]"},
		// outside (lte, gt]
		{&validate.Int32Rules{Gt: i32(5), Lte: i32(1)}, 1, ""},
		{&validate.Int32Rules{Gt: i32(5), Lte: i32(1)}, 2, "value must be outside range (1, 5]"},
		{&validate.Int32Rules{Gt: i32(5), Lte: i32(1)}, 5, "value must be outside range (1, 5]"},
		{&validate.Int32Rules{Gt: i32(5), Lte: i32(1)}, 6, ""},
		{&validate.Int32Rules{Gt: i32(3), Lte: i32(3)}, 3, ""},
		{&validate.Int32Rules{Gt: i32(3), Lte: i32(3)}, 4, ""},
		{&validate.Int32Rules{Gt: i32(3), Lte: i32(3)}, 2, ""},
		// lte, gte: inside [gte, lte]
		{&validate.Int32Rules{Gte: i32(1), Lte: i32(5)}, 0, "value must be inside range [1, 5]"},
		{&validate.Int32Rules{Gte: i32(1), Lte: i32(5)}, 1, ""},
		{&validate.Int32Rules{Gte: i32(1), Lte: i32(5)}, 5, ""},
		{&validate.Int32Rules{Gte: i32(1), Lte: i32(5)}, 6, "value must be inside range [1, 5]"},
		// outside (lte, gte)
		{&validate.Int32Rules{Gte: i32(5), Lte: i32(1)}, 1, ""},
		{&validate.Int32Rules{Gte: i32(5), Lte: i32(1)}, 2, "value must be outside range (1, 5)"},
		{&validate.Int32Rules{Gte: i32(5), Lte: i32(1)}, 4, "value must be outside range (1, 5)"},
		{&validate.Int32Rules{Gte: i32(5), Lte: i32(1)}, 5, ""},
		{&validate.Int32Rules{Gte: i32(3), Lte: i32(3)}, 3, ""},
		{&validate.Int32Rules{Gte: i32(3), Lte: i32(3)}, 4, ""},
		{&validate.Int32Rules{Gte: i32(3), Lte: i32(3)}, 2, ""},
		{&validate.Int32Rules{Lte: i32(3)}, 3, ""},
		{&validate.Int32Rules{Lte: i32(3)}, 4, "value must be less than or equal to 3"},
		{&validate.Int32Rules{Gt: i32(3)}, 3, "value must be greater than 3"},
		{&validate.Int32Rules{Gt: i32(3)}, 4, ""},
		{&validate.Int32Rules{Gte: i32(3)}, 2, "value must be greater than or equal to 3"},
		{&validate.Int32Rules{Gte: i32(3)}, 3, ""},
		{&validate.Int32Rules{In: []int32{1, 3}}, 3, ""},
		{&validate.Int32Rules{In: []int32{1, 3}}, 2, "value must be in list [1 3]"},
		{&validate.Int32Rules{NotIn: []int32{1, 3}}, 3, "value must not be in list [1 3]"},
		{&validate.Int32Rules{NotIn: []int32{1, 3}}, 2, ""},
		{&validate.Int32Rules{}, 2, ""},
		{&validate.Int32Rules{Gt: i32(3), IgnoreEmpty: proto.Bool(true)}, 0, ""},
		{&validate.Int32Rules{Gt: i32(3), IgnoreEmpty: proto.Bool(true)}, 1, "value must be greater than 3"},
		{&validate.Int32Rules{Gt: i32(3)}, 0, "value must be greater than 3"},
	}
	for _, c := range cases {
		got := apply(t, fieldType{kind: protoreflect.Int32Kind}, &validate.FieldRules{Type: &validate.FieldRules_Int32{Int32: c.r}}, nil, protoreflect.ValueOfInt32(c.v), true)
		var want []string
		if c.want != "" {
			want = []string{pre + c.want}
		}
		expect(t, c.r.String()+" v="+string(rune('0'+c.v)), got, want...)
	}
}

func dur(s int64) *durationpb.Duration { return &durationpb.Duration{Seconds: s} }

func durMsg(s int64, n int32) protoreflect.Value {
	return protoreflect.ValueOfMessage((&durationpb.Duration{Seconds: s, Nanos: n}).ProtoReflect())
}

func TestDurationBoundaries(t *testing.T) {
	const pre = "invalid M.F: "
	type tc struct {
		r    *validate.DurationRules
		v    int64
		want string
	}
	cases := []tc{
		{&validate.DurationRules{Const: dur(5)}, 5, ""},
		{&validate.DurationRules{Const: dur(5)}, 4, "value must equal 5s"},
		{&validate.DurationRules{Gt: dur(1), Lt: dur(5)}, 1, "value must be inside range (1s, 5s)"},
		{&validate.DurationRules{Gt: dur(1), Lt: dur(5)}, 2, ""},
		{&validate.DurationRules{Gt: dur(1), Lt: dur(5)}, 4, ""},
		{&validate.DurationRules{Gt: dur(1), Lt: dur(5)}, 5, "value must be inside range (1s, 5s)"},
		{&validate.DurationRules{Gt: dur(5), Lt: dur(1)}, 0, ""},
		{&validate.DurationRules{Gt: dur(5), Lt: dur(1)}, 1, "value must be outside range [1s, 5s]"},
		{&validate.DurationRules{Gt: dur(5), Lt: dur(1)}, 5, "value must be outside range [1s, 5s]"},
		{&validate.DurationRules{Gt: dur(5), Lt: dur(1)}, 6, ""},
		{&validate.DurationRules{Gt: dur(3), Lt: dur(3)}, 3, "value must be outside range [3s, 3s]"},
		{&validate.DurationRules{Gt: dur(3), Lt: dur(3)}, 4, ""},
		{&validate.DurationRules{Gt: dur(3), Lt: dur(3)}, 2, ""},
		{&validate.DurationRules{Gte: dur(1), Lt: dur(5)}, 0, "value must be inside range [1s, 5s)"},
		{&validate.DurationRules{Gte: dur(1), Lt: dur(5)}, 1, ""},
		{&validate.DurationRules{Gte: dur(1), Lt: dur(5)}, 4, ""},
		{&validate.DurationRules{Gte: dur(1), Lt: dur(5)}, 5, "value must be inside range [1s, 5s)"},
		{&validate.DurationRules{Gte: dur(5), Lt: dur(1)}, 0, ""},
		{&validate.DurationRules{Gte: dur(5), Lt: dur(1)}, 1, "value must be outside range [1s, 5s)"},
		{&validate.DurationRules{Gte: dur(5), Lt: dur(1)}, 4, "value must be outside range [1s, 5s)"},
		{&validate.DurationRules{Gte: dur(5), Lt: dur(1)}, 5, ""},
		{&validate.DurationRules{Gte: dur(3), Lt: dur(3)}, 3, ""},
		{&validate.DurationRules{Gte: dur(3), Lt: dur(3)}, 4, ""},
		{&validate.DurationRules{Gte: dur(3), Lt: dur(3)}, 2, ""},
		{&validate.DurationRules{Lt: dur(3)}, 2, ""},
		{&validate.DurationRules{Lt: dur(3)}, 3, "value must be less than 3s"},
		{&validate.DurationRules{Gt: dur(1), Lte: dur(5)}, 1, "value must be inside range (1s, 5s]"},
		{&validate.DurationRules{Gt: dur(1), Lte: dur(5)}, 2, ""},
		{&validate.DurationRules{Gt: dur(1), Lte: dur(5)}, 5, ""},
		{&validate.DurationRules{Gt: dur(1), Lte: dur(5)}, 6, "value must be inside range (1s, 5s]"},
		{&validate.DurationRules{Gt: dur(5), Lte: dur(1)}, 1, ""},
		{&validate.DurationRules{Gt: dur(5), Lte: dur(1)}, 2, "value must be outside range (1s, 5s]"},
		{&validate.DurationRules{Gt: dur(5), Lte: dur(1)}, 5, "value must be outside range (1s, 5s]"},
		{&validate.DurationRules{Gt: dur(5), Lte: dur(1)}, 6, ""},
		{&validate.DurationRules{Gt: dur(3), Lte: dur(3)}, 3, ""},
		{&validate.DurationRules{Gt: dur(3), Lte: dur(3)}, 4, ""},
		{&validate.DurationRules{Gt: dur(3), Lte: dur(3)}, 2, ""},
		{&validate.DurationRules{Gte: dur(1), Lte: dur(5)}, 0, "value must be inside range [1s, 5s]"},
		{&validate.DurationRules{Gte: dur(1), Lte: dur(5)}, 1, ""},
		{&validate.DurationRules{Gte: dur(1), Lte: dur(5)}, 5, ""},
		{&validate.DurationRules{Gte: dur(1), Lte: dur(5)}, 6, "value must be inside range [1s, 5s]"},
		{&validate.DurationRules{Gte: dur(5), Lte: dur(1)}, 1, ""},
		{&validate.DurationRules{Gte: dur(5), Lte: dur(1)}, 2, "value must be outside range (1s, 5s)"},
		{&validate.DurationRules{Gte: dur(5), Lte: dur(1)}, 4, "value must be outside range (1s, 5s)"},
		{&validate.DurationRules{Gte: dur(5), Lte: dur(1)}, 5, ""},
		{&validate.DurationRules{Gte: dur(3), Lte: dur(3)}, 3, ""},
		{&validate.DurationRules{Gte: dur(3), Lte: dur(3)}, 4, ""},
		{&validate.DurationRules{Gte: dur(3), Lte: dur(3)}, 2, ""},
		{&validate.DurationRules{Lte: dur(3)}, 3, ""},
		{&validate.DurationRules{Lte: dur(3)}, 4, "value must be less than or equal to 3s"},
		{&validate.DurationRules{Gt: dur(3)}, 3, "value must be greater than 3s"},
		{&validate.DurationRules{Gt: dur(3)}, 4, ""},
		{&validate.DurationRules{Gte: dur(3)}, 2, "value must be greater than or equal to 3s"},
		{&validate.DurationRules{Gte: dur(3)}, 3, ""},
		{&validate.DurationRules{}, 3, ""},
	}
	rules := func(r *validate.DurationRules) *validate.FieldRules {
		return &validate.FieldRules{Type: &validate.FieldRules_Duration{Duration: r}}
	}
	ft := fieldType{kind: protoreflect.MessageKind}
	for _, c := range cases {
		got := apply(t, ft, rules(c.r), nil, durMsg(c.v, 0), true)
		var want []string
		if c.want != "" {
			want = []string{pre + c.want}
		}
		expect(t, c.r.String(), got, want...)
	}
	// Each bound alone decides (no other bound set): an invalid duration
	// is reported only when some bound or const is there to check.
	for _, r := range []*validate.DurationRules{{Const: dur(1)}, {Lt: dur(1)}, {Lte: dur(1)}, {Gt: dur(1)}, {Gte: dur(1)}} {
		got := apply(t, ft, rules(r), nil, durMsg(1, -1), true)
		if len(got) != 1 || !strings.HasPrefix(got[0], pre+"value is not a valid duration | caused by:") {
			t.Errorf("%v on an invalid duration: %q", r, got)
		}
	}
	expect(t, "unchecked invalid", apply(t, ft, rules(&validate.DurationRules{}), nil, durMsg(1, -1), true))
	expect(t, "required unset", apply(t, ft, rules(&validate.DurationRules{Required: proto.Bool(true), Gt: dur(1)}), nil, protoreflect.Value{}, false), pre+"value is required")
	expect(t, "unset", apply(t, ft, rules(&validate.DurationRules{Gt: dur(1)}), nil, protoreflect.Value{}, false))
	expect(t, "required set", apply(t, ft, rules(&validate.DurationRules{Required: proto.Bool(true)}), nil, durMsg(0, 0), true))
	// Nanoseconds count: 3s+1ns is above 3s.
	expect(t, "nanos", apply(t, ft, rules(&validate.DurationRules{Lte: dur(3)}), nil, durMsg(3, 1), true), pre+"value must be less than or equal to 3s")
}

// TestScalarRulesWrapOnlySingularMessages: a scalar rule on a singular
// message field (a wrapper: google.protobuf.FloatValue) checks the
// wrapper's value; on a repeated or map field, or a scalar one, it is not
// wrapped.
func TestScalarRulesWrapOnlySingularMessages(t *testing.T) {
	gt := float32(0)
	rules := &validate.FieldRules{Type: &validate.FieldRules_Float{Float: &validate.FloatRules{Gt: &gt}}}
	for _, c := range []struct {
		name string
		ft   fieldType
		want bool
	}{
		{"singular message", fieldType{kind: protoreflect.MessageKind}, true},
		{"singular group", fieldType{kind: protoreflect.GroupKind}, true},
		{"scalar", fieldType{kind: protoreflect.FloatKind}, false},
		{"repeated message", fieldType{repeated: true, kind: protoreflect.MessageKind}, false},
		{"map of messages", fieldType{isMap: true, kind: protoreflect.MessageKind}, false},
	} {
		if got := c.ft.embed(); got != c.want {
			t.Errorf("%s: embed() = %v, want %v", c.name, got, c.want)
		}
		rc, err := resolve(c.ft, rules, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := rc.kind == kindWrapper; got != c.want {
			t.Errorf("%s: wrapped = %v, want %v", c.name, got, c.want)
		}
	}
}
