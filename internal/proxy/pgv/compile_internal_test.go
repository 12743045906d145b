package pgv

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/envoyproxy/protoc-gen-validate/validate"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// O names the compiled test message in errors.
type O struct{}

// compileFile builds messages whose rules the linked Envoy types do not
// have: validate.disabled and validate.ignored messages, proto3 optional
// fields with rules, several oneofs, one required.
func compileFile(t *testing.T) protoreflect.FileDescriptor {
	t.Helper()
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING
	i32 := descriptorpb.FieldDescriptorProto_TYPE_INT32
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
	minLen := func(n uint64) *descriptorpb.FieldOptions {
		o := &descriptorpb.FieldOptions{}
		proto.SetExtension(o, validate.E_Rules, &validate.FieldRules{Type: &validate.FieldRules_String_{String_: &validate.StringRules{MinLen: &n}}})
		return o
	}
	gt := func(n int32) *descriptorpb.FieldOptions {
		o := &descriptorpb.FieldOptions{}
		proto.SetExtension(o, validate.E_Rules, &validate.FieldRules{Type: &validate.FieldRules_Int32{Int32: &validate.Int32Rules{Gt: &n}}})
		return o
	}
	field := func(name string, n int32, k descriptorpb.FieldDescriptorProto_Type, o *descriptorpb.FieldOptions, oneof int32, optional bool) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(n), Label: &opt, Type: &k, Options: o}
		if oneof >= 0 {
			f.OneofIndex = proto.Int32(oneof)
		}
		if optional {
			f.Proto3Optional = proto.Bool(true)
		}
		return f
	}
	msgOpts := func(ext protoreflect.ExtensionType) *descriptorpb.MessageOptions {
		o := &descriptorpb.MessageOptions{}
		proto.SetExtension(o, ext, true)
		return o
	}
	required := &descriptorpb.OneofOptions{}
	proto.SetExtension(required, validate.E_Required, true)
	fdp := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("pgvcompile.proto"),
		Package: proto.String("pgvcompile"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("Disabled"), Options: msgOpts(validate.E_Disabled), Field: []*descriptorpb.FieldDescriptorProto{field("a", 1, str, minLen(1), -1, false)}},
			{Name: proto.String("Ignored"), Options: msgOpts(validate.E_Ignored), Field: []*descriptorpb.FieldDescriptorProto{field("a", 1, str, minLen(1), -1, false)}},
			{
				Name: proto.String("O"),
				Field: []*descriptorpb.FieldDescriptorProto{
					field("opt_a", 1, str, minLen(3), 3, true), // proto3 optional, declared first
					field("a", 2, str, minLen(1), -1, false),
					field("b", 3, str, minLen(2), 0, false),
					field("c", 4, i32, gt(0), 0, false),
					field("d", 5, str, minLen(1), 1, false),
					field("e", 6, str, nil, 2, false), // a required oneof without rules
					field("opt_b", 7, i32, gt(1), 4, true),
					field("z", 8, i32, gt(5), -1, false),
				},
				OneofDecl: []*descriptorpb.OneofDescriptorProto{
					{Name: proto.String("x"), Options: required},
					{Name: proto.String("y")},
					{Name: proto.String("w"), Options: required},
					{Name: proto.String("_opt_a")},
					{Name: proto.String("_opt_b")},
				},
			},
		},
	}
	fd, err := protodesc.NewFile(fdp, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

func TestCompileOptions(t *testing.T) {
	fd := compileFile(t)
	for _, name := range []protoreflect.Name{"Disabled", "Ignored"} {
		mr, err := compileMessage(fd.Messages().ByName(name), reflect.TypeOf(O{}))
		if mr != nil || err != nil {
			t.Errorf("%s: compiled to %v, %v; want no rules", name, mr, err)
		}
	}
	md := fd.Messages().ByName("O")
	mr, err := compileMessage(md, reflect.TypeOf(&O{}))
	if err != nil {
		t.Fatal(err)
	}
	cache.Store(md, compiled{rules: mr})
	defer cache.Delete(md)
	set := func(m *dynamicpb.Message, name string, v any) {
		m.Set(md.Fields().ByName(protoreflect.Name(name)), protoreflect.ValueOf(v))
	}
	for _, c := range []struct {
		fields map[string]any
		want   []string
	}{
		{nil, []string{"A: value length must be at least 1 runes", "Z: value must be greater than 5", "X: value is required", "W: value is required"}},
		{map[string]any{"a": "x", "z": int32(6), "b": "xy", "e": ""}, nil},
		{map[string]any{"a": "x", "z": int32(6), "b": "x", "d": "", "e": ""}, []string{"B: value length must be at least 2 runes", "D: value length must be at least 1 runes"}},
		{map[string]any{"a": "x", "z": int32(6), "c": int32(0), "e": "", "d": "y"}, []string{"C: value must be greater than 0"}},
		{map[string]any{"a": "x", "z": int32(6), "c": int32(1), "e": "", "opt_a": "ab", "opt_b": int32(1)},
			[]string{"OptA: value length must be at least 3 runes", "OptB: value must be greater than 1"}},
		{map[string]any{"a": "x", "z": int32(6), "c": int32(1), "opt_a": "abc", "opt_b": int32(2)}, []string{"W: value is required"}},
		{map[string]any{"z": int32(6), "c": int32(1), "e": "", "opt_a": ""},
			[]string{"A: value length must be at least 1 runes", "OptA: value length must be at least 3 runes"}},
	} {
		m := dynamicpb.NewMessage(md)
		for k, v := range c.fields {
			set(m, k, v)
		}
		err := validateMessage(m)
		var got []string
		var me MultiError
		if errors.As(err, &me) {
			for _, e := range me {
				got = append(got, strings.TrimPrefix(e.Error(), "invalid O."))
			}
		}
		expect(t, "O"+func() string {
			s := ""
			for k := range c.fields {
				s += " " + k
			}
			return s
		}(), got, c.want...)
	}
}

// TestCompileErrors: a rule this package does not implement is refused
// when the type is compiled, not skipped.
func TestCompileErrors(t *testing.T) {
	s := func(r *validate.StringRules) *validate.FieldRules {
		return &validate.FieldRules{Type: &validate.FieldRules_String_{String_: r}}
	}
	for _, c := range []struct {
		ft    fieldType
		rules *validate.FieldRules
	}{
		{fieldType{kind: protoreflect.StringKind}, s(&validate.StringRules{WellKnown: &validate.StringRules_Email{Email: true}})},
		{fieldType{kind: protoreflect.StringKind}, s(&validate.StringRules{WellKnown: &validate.StringRules_Uuid{Uuid: true}})},
		{fieldType{kind: protoreflect.StringKind}, s(&validate.StringRules{WellKnown: &validate.StringRules_WellKnownRegex{WellKnownRegex: validate.KnownRegex(7)}})},
		{fieldType{kind: protoreflect.StringKind}, s(&validate.StringRules{Pattern: proto.String("(")})},
		{fieldType{kind: protoreflect.BytesKind}, &validate.FieldRules{Type: &validate.FieldRules_Bytes{Bytes: &validate.BytesRules{Pattern: proto.String("(")}}}},
		{fieldType{kind: protoreflect.BytesKind}, &validate.FieldRules{Type: &validate.FieldRules_Bytes{Bytes: &validate.BytesRules{WellKnown: &validate.BytesRules_Ip{Ip: false}}}}},
		{fieldType{kind: protoreflect.MessageKind}, &validate.FieldRules{Type: &validate.FieldRules_Duration{Duration: &validate.DurationRules{In: []*durationpb.Duration{dur(1)}}}}},
		{fieldType{kind: protoreflect.MessageKind}, &validate.FieldRules{Type: &validate.FieldRules_Duration{Duration: &validate.DurationRules{NotIn: []*durationpb.Duration{dur(1)}}}}},
		{fieldType{kind: protoreflect.MessageKind}, &validate.FieldRules{Type: &validate.FieldRules_Timestamp{Timestamp: &validate.TimestampRules{}}}},
		{fieldType{repeated: true, kind: protoreflect.StringKind}, &validate.FieldRules{Type: &validate.FieldRules_Repeated{Repeated: &validate.RepeatedRules{Items: s(&validate.StringRules{Pattern: proto.String("(")})}}}},
		{fieldType{isMap: true, kind: protoreflect.StringKind}, &validate.FieldRules{Type: &validate.FieldRules_Map{Map: &validate.MapRules{Values: s(&validate.StringRules{Pattern: proto.String("(")})}}}},
	} {
		if rc, err := resolve(c.ft, c.rules, nil); err == nil {
			t.Errorf("%v compiled to %+v", c.rules, rc)
		}
	}
	md := testMsg(t)
	ms := md.Fields().ByName("ms")
	if rc, err := resolve(fieldTypeOf(ms), &validate.FieldRules{Type: &validate.FieldRules_Map{Map: &validate.MapRules{Keys: s(&validate.StringRules{Pattern: proto.String("(")})}}}, ms); err == nil {
		t.Errorf("a bad key pattern compiled to %+v", rc)
	}
	// Each well-known header regex on its own compiles.
	for _, wk := range []validate.KnownRegex{validate.KnownRegex_HTTP_HEADER_NAME, validate.KnownRegex_HTTP_HEADER_VALUE} {
		if _, err := resolve(fieldType{kind: protoreflect.StringKind}, s(&validate.StringRules{WellKnown: &validate.StringRules_WellKnownRegex{WellKnownRegex: wk}}), nil); err != nil {
			t.Errorf("%v: %v", wk, err)
		}
	}
}
