package pgv

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/envoyproxy/protoc-gen-validate/validate"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// testMsg is a message with a field of each shape the item rules walk:
// lists, maps keyed by each key kind, enums.
func testMsg(t *testing.T) protoreflect.MessageDescriptor {
	t.Helper()
	lbl := func(l descriptorpb.FieldDescriptorProto_Label) *descriptorpb.FieldDescriptorProto_Label { return &l }
	typ := func(k descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto_Type { return &k }
	opt, rep := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL, descriptorpb.FieldDescriptorProto_LABEL_REPEATED
	field := func(name string, n int32, l descriptorpb.FieldDescriptorProto_Label, k descriptorpb.FieldDescriptorProto_Type, tn string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(n), Label: lbl(l), Type: typ(k)}
		if tn != "" {
			f.TypeName = proto.String(tn)
		}
		return f
	}
	entry := func(name string, k descriptorpb.FieldDescriptorProto_Type) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{
			Name:    proto.String(name),
			Field:   []*descriptorpb.FieldDescriptorProto{field("key", 1, opt, k, ""), field("value", 2, opt, descriptorpb.FieldDescriptorProto_TYPE_INT32, "")},
			Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
		}
	}
	T := descriptorpb.FieldDescriptorProto_TYPE_INT32
	fdp := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("pgvtest.proto"),
		Package: proto.String("pgvtest"),
		Syntax:  proto.String("proto3"),
		EnumType: []*descriptorpb.EnumDescriptorProto{{
			Name: proto.String("E"),
			Value: []*descriptorpb.EnumValueDescriptorProto{
				{Name: proto.String("ZERO"), Number: proto.Int32(0)},
				{Name: proto.String("ONE"), Number: proto.Int32(1)},
				{Name: proto.String("TWO"), Number: proto.Int32(2)},
			},
		}},
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("T"),
			Field: []*descriptorpb.FieldDescriptorProto{
				field("e", 1, opt, descriptorpb.FieldDescriptorProto_TYPE_ENUM, ".pgvtest.E"),
				field("es", 2, rep, descriptorpb.FieldDescriptorProto_TYPE_ENUM, ".pgvtest.E"),
				field("ints", 3, rep, T, ""),
				field("bs", 4, rep, descriptorpb.FieldDescriptorProto_TYPE_BYTES, ""),
				field("ms", 5, rep, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".pgvtest.T.MsEntry"),
				field("mi32", 6, rep, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".pgvtest.T.Mi32Entry"),
				field("mi64", 7, rep, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".pgvtest.T.Mi64Entry"),
				field("mu32", 8, rep, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".pgvtest.T.Mu32Entry"),
				field("mu64", 9, rep, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".pgvtest.T.Mu64Entry"),
				field("mb", 10, rep, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".pgvtest.T.MbEntry"),
			},
			NestedType: []*descriptorpb.DescriptorProto{
				entry("MsEntry", descriptorpb.FieldDescriptorProto_TYPE_STRING),
				entry("Mi32Entry", descriptorpb.FieldDescriptorProto_TYPE_SINT32),
				entry("Mi64Entry", descriptorpb.FieldDescriptorProto_TYPE_INT64),
				entry("Mu32Entry", descriptorpb.FieldDescriptorProto_TYPE_UINT32),
				entry("Mu64Entry", descriptorpb.FieldDescriptorProto_TYPE_FIXED64),
				entry("MbEntry", descriptorpb.FieldDescriptorProto_TYPE_BOOL),
			},
		}},
	}
	fd, err := protodesc.NewFile(fdp, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fd.Messages().Get(0)
}

func fieldTypeOf(fd protoreflect.FieldDescriptor) fieldType {
	switch {
	case fd.IsList():
		return fieldType{repeated: true, kind: fd.Kind(), enum: fd.Enum(), msg: fd.Message()}
	case fd.IsMap():
		return fieldType{isMap: true, kind: fd.MapValue().Kind(), enum: fd.MapValue().Enum(), msg: fd.MapValue().Message()}
	}
	return fieldType{kind: fd.Kind(), enum: fd.Enum(), msg: fd.Message()}
}

func prefixed(want []string) []string {
	out := make([]string, len(want))
	for i, w := range want {
		out[i] = "invalid M." + w
	}
	return out
}

func TestEnumRules(t *testing.T) {
	md := testMsg(t)
	e, es := md.Fields().ByName("e"), md.Fields().ByName("es")
	type tc struct {
		r    *validate.EnumRules
		v    int32
		want []string
	}
	single := []tc{
		{&validate.EnumRules{Const: proto.Int32(1)}, 1, nil},
		{&validate.EnumRules{Const: proto.Int32(1)}, 2, []string{"F: value must equal ONE"}},
		{&validate.EnumRules{In: []int32{1, 2}}, 2, nil},
		{&validate.EnumRules{In: []int32{1, 2}}, 0, []string{"F: value must be in list [ONE TWO]"}},
		{&validate.EnumRules{NotIn: []int32{0, 5}}, 0, []string{"F: value must not be in list [ZERO ]"}},
		{&validate.EnumRules{NotIn: []int32{0}}, 1, nil},
		{&validate.EnumRules{}, 1, nil},
		{&validate.EnumRules{DefinedOnly: proto.Bool(true)}, 2, nil},
		{&validate.EnumRules{DefinedOnly: proto.Bool(true)}, 3, []string{"F: value must be one of the defined enum values"}},
		{&validate.EnumRules{DefinedOnly: proto.Bool(false)}, 3, nil},
	}
	for _, c := range single {
		got := apply(t, fieldTypeOf(e), &validate.FieldRules{Type: &validate.FieldRules_Enum{Enum: c.r}}, e, protoreflect.ValueOfEnum(protoreflect.EnumNumber(c.v)), true)
		expect(t, c.r.String(), got, prefixed(c.want)...)
	}
	// Items of a list of enums: numbers, not names (the templates' isEnum
	// is false for an item).
	items := []tc{
		{&validate.EnumRules{Const: proto.Int32(1)}, 2, []string{"F[0]: value must equal 1"}},
		{&validate.EnumRules{In: []int32{1, 2}}, 0, []string{"F[0]: value must be in list [1 2]"}},
		{&validate.EnumRules{NotIn: []int32{0, 5}}, 0, []string{"F[0]: value must not be in list [0 5]"}},
	}
	for _, c := range items {
		l := dynamicpb.NewMessage(md).Mutable(es).List()
		l.Append(protoreflect.ValueOfEnum(protoreflect.EnumNumber(c.v)))
		r := &validate.FieldRules{Type: &validate.FieldRules_Repeated{Repeated: &validate.RepeatedRules{Items: &validate.FieldRules{Type: &validate.FieldRules_Enum{Enum: c.r}}}}}
		got := apply(t, fieldTypeOf(es), r, es, protoreflect.ValueOfList(l), true)
		expect(t, "items "+c.r.String(), got, prefixed(c.want)...)
	}
}

func TestRepeatedRules(t *testing.T) {
	md := testMsg(t)
	ints, bs := md.Fields().ByName("ints"), md.Fields().ByName("bs")
	list := func(vs ...int32) protoreflect.Value {
		l := dynamicpb.NewMessage(md).Mutable(ints).List()
		for _, v := range vs {
			l.Append(protoreflect.ValueOfInt32(v))
		}
		return protoreflect.ValueOfList(l)
	}
	type tc struct {
		r    *validate.RepeatedRules
		v    []int32
		want []string
	}
	cases := []tc{
		{&validate.RepeatedRules{MinItems: u64(2), MaxItems: u64(2)}, []int32{1}, []string{"F: value must contain exactly 2 item(s)"}},
		{&validate.RepeatedRules{MinItems: u64(2), MaxItems: u64(2)}, []int32{1, 2}, nil},
		{&validate.RepeatedRules{MinItems: u64(2), MaxItems: u64(2)}, []int32{1, 2, 3}, []string{"F: value must contain exactly 2 item(s)"}},
		{&validate.RepeatedRules{MinItems: u64(2), MaxItems: u64(3)}, []int32{1}, []string{"F: value must contain between 2 and 3 items, inclusive"}},
		{&validate.RepeatedRules{MinItems: u64(2), MaxItems: u64(3)}, []int32{1, 2}, nil},
		{&validate.RepeatedRules{MinItems: u64(2), MaxItems: u64(3)}, []int32{1, 2, 3}, nil},
		{&validate.RepeatedRules{MinItems: u64(2), MaxItems: u64(3)}, []int32{1, 2, 3, 4}, []string{"F: value must contain between 2 and 3 items, inclusive"}},
		{&validate.RepeatedRules{MinItems: u64(2)}, []int32{1}, []string{"F: value must contain at least 2 item(s)"}},
		{&validate.RepeatedRules{MinItems: u64(2)}, []int32{1, 2}, nil},
		{&validate.RepeatedRules{MaxItems: u64(2)}, []int32{1, 2}, nil},
		{&validate.RepeatedRules{MaxItems: u64(2)}, []int32{1, 2, 3}, []string{"F: value must contain no more than 2 item(s)"}},
		{&validate.RepeatedRules{MinItems: u64(0), MaxItems: u64(0)}, []int32{1}, []string{"F: value must contain no more than 0 item(s)"}},
		{&validate.RepeatedRules{MinItems: u64(0), MaxItems: u64(0)}, nil, nil},
		{&validate.RepeatedRules{MinItems: u64(1), IgnoreEmpty: proto.Bool(true)}, nil, nil},
		{&validate.RepeatedRules{MinItems: u64(1)}, nil, []string{"F: value must contain at least 1 item(s)"}},
		{&validate.RepeatedRules{MinItems: u64(3), IgnoreEmpty: proto.Bool(true)}, []int32{1}, []string{"F: value must contain at least 3 item(s)"}},
		{&validate.RepeatedRules{Unique: proto.Bool(true)}, []int32{1, 2, 1, 1}, []string{"F[2]: repeated value must contain unique items", "F[3]: repeated value must contain unique items"}},
		{&validate.RepeatedRules{Unique: proto.Bool(true)}, []int32{1, 2}, nil},
		{&validate.RepeatedRules{Unique: proto.Bool(false)}, []int32{1, 1}, nil},
		{&validate.RepeatedRules{Items: &validate.FieldRules{Type: &validate.FieldRules_Int32{Int32: &validate.Int32Rules{Gt: i32(1)}}}}, []int32{2, 1, 3, 0},
			[]string{"F[1]: value must be greater than 1", "F[3]: value must be greater than 1"}},
		{&validate.RepeatedRules{Unique: proto.Bool(true), Items: &validate.FieldRules{Type: &validate.FieldRules_Int32{Int32: &validate.Int32Rules{Gt: i32(1)}}}}, []int32{1, 1},
			[]string{"F[0]: value must be greater than 1", "F[1]: repeated value must contain unique items", "F[1]: value must be greater than 1"}},
	}
	for _, c := range cases {
		got := apply(t, fieldTypeOf(ints), &validate.FieldRules{Type: &validate.FieldRules_Repeated{Repeated: c.r}}, ints, list(c.v...), true)
		expect(t, c.r.String(), got, prefixed(c.want)...)
	}
	l := dynamicpb.NewMessage(md).Mutable(bs).List()
	for _, b := range []string{"a", "b", "a", ""} {
		l.Append(protoreflect.ValueOfBytes([]byte(b)))
	}
	got := apply(t, fieldTypeOf(bs), &validate.FieldRules{Type: &validate.FieldRules_Repeated{Repeated: &validate.RepeatedRules{Unique: proto.Bool(true)}}}, bs, protoreflect.ValueOfList(l), true)
	expect(t, "unique bytes", got, prefixed([]string{"F[2]: repeated value must contain unique items"})...)
}

func TestMapRules(t *testing.T) {
	md := testMsg(t)
	ms := md.Fields().ByName("ms")
	mapOf := func(fd protoreflect.FieldDescriptor, kv map[any]int32) protoreflect.Value {
		m := dynamicpb.NewMessage(md).Mutable(fd).Map()
		for k, v := range kv {
			m.Set(protoreflect.ValueOf(k).MapKey(), protoreflect.ValueOfInt32(v))
		}
		return protoreflect.ValueOfMap(m)
	}
	n := func(k int) map[any]int32 {
		kv := map[any]int32{}
		for i := range k {
			kv[string(rune('a'+i))] = 1
		}
		return kv
	}
	type tc struct {
		r    *validate.MapRules
		v    map[any]int32
		want []string
	}
	cases := []tc{
		{&validate.MapRules{MinPairs: u64(2), MaxPairs: u64(2)}, n(1), []string{"F: value must contain exactly 2 pair(s)"}},
		{&validate.MapRules{MinPairs: u64(2), MaxPairs: u64(2)}, n(2), nil},
		{&validate.MapRules{MinPairs: u64(2), MaxPairs: u64(2)}, n(3), []string{"F: value must contain exactly 2 pair(s)"}},
		{&validate.MapRules{MinPairs: u64(2), MaxPairs: u64(3)}, n(1), []string{"F: value must contain between 2 and 3 pairs, inclusive"}},
		{&validate.MapRules{MinPairs: u64(2), MaxPairs: u64(3)}, n(2), nil},
		{&validate.MapRules{MinPairs: u64(2), MaxPairs: u64(3)}, n(3), nil},
		{&validate.MapRules{MinPairs: u64(2), MaxPairs: u64(3)}, n(4), []string{"F: value must contain between 2 and 3 pairs, inclusive"}},
		{&validate.MapRules{MinPairs: u64(2)}, n(1), []string{"F: value must contain at least 2 pair(s)"}},
		{&validate.MapRules{MinPairs: u64(2)}, n(2), nil},
		{&validate.MapRules{MaxPairs: u64(2)}, n(2), nil},
		{&validate.MapRules{MaxPairs: u64(2)}, n(3), []string{"F: value must contain no more than 2 pair(s)"}},
		{&validate.MapRules{MinPairs: u64(0), MaxPairs: u64(0)}, n(1), []string{"F: value must contain no more than 0 pair(s)"}},
		{&validate.MapRules{MinPairs: u64(0), MaxPairs: u64(0)}, n(0), nil},
		{&validate.MapRules{MinPairs: u64(1), IgnoreEmpty: proto.Bool(true)}, n(0), nil},
		{&validate.MapRules{MinPairs: u64(1)}, n(0), []string{"F: value must contain at least 1 pair(s)"}},
		{&validate.MapRules{MinPairs: u64(3), IgnoreEmpty: proto.Bool(true)}, n(1), []string{"F: value must contain at least 3 pair(s)"}},
		// Keys and values, in key order.
		{&validate.MapRules{Values: &validate.FieldRules{Type: &validate.FieldRules_Int32{Int32: &validate.Int32Rules{Gt: i32(1)}}}}, map[any]int32{"c": 0, "a": 1, "b": 2, "": 0},
			[]string{"F[]: value must be greater than 1", "F[a]: value must be greater than 1", "F[c]: value must be greater than 1"}},
		{&validate.MapRules{Keys: &validate.FieldRules{Type: &validate.FieldRules_String_{String_: &validate.StringRules{MinLen: u64(2)}}}}, map[any]int32{"c": 0, "ab": 1, "b": 2},
			[]string{"F[b]: value length must be at least 2 runes", "F[c]: value length must be at least 2 runes"}},
		{&validate.MapRules{Keys: &validate.FieldRules{Type: &validate.FieldRules_String_{String_: &validate.StringRules{MinLen: u64(2)}}},
			Values: &validate.FieldRules{Type: &validate.FieldRules_Int32{Int32: &validate.Int32Rules{Gt: i32(1)}}}}, map[any]int32{"c": 0},
			[]string{"F[c]: value length must be at least 2 runes", "F[c]: value must be greater than 1"}},
	}
	for _, c := range cases {
		got := apply(t, fieldTypeOf(ms), &validate.FieldRules{Type: &validate.FieldRules_Map{Map: c.r}}, ms, mapOf(ms, c.v), true)
		expect(t, c.r.String(), got, prefixed(c.want)...)
	}
	// The order of each key kind.
	values := &validate.FieldRules{Type: &validate.FieldRules_Map{Map: &validate.MapRules{Values: &validate.FieldRules{Type: &validate.FieldRules_Int32{Int32: &validate.Int32Rules{Gt: i32(1)}}}}}}
	for _, k := range []struct {
		field string
		kv    map[any]int32
		want  []string
	}{
		{"mi32", map[any]int32{int32(2): 0, int32(-1): 0, int32(10): 0}, []string{"-1", "2", "10"}},
		{"mi64", map[any]int32{int64(2): 0, int64(-1): 0, int64(10): 0}, []string{"-1", "2", "10"}},
		{"mu32", map[any]int32{uint32(2): 0, uint32(1): 0, uint32(10): 0}, []string{"1", "2", "10"}},
		{"mu64", map[any]int32{uint64(2): 0, uint64(1): 0, uint64(10): 0}, []string{"1", "2", "10"}},
		{"mb", map[any]int32{true: 0, false: 0}, []string{"false", "true"}},
		{"ms", map[any]int32{"b": 0, "a": 0, "ab": 0}, []string{"a", "ab", "b"}},
	} {
		fd := md.Fields().ByName(protoreflect.Name(k.field))
		for range 5 { // map iteration is random: sorting must not depend on it
			got := apply(t, fieldTypeOf(fd), values, fd, mapOf(fd, k.kv), true)
			want := make([]string, len(k.want))
			for i, key := range k.want {
				want[i] = "F[" + key + "]: value must be greater than 1"
			}
			expect(t, k.field, got, prefixed(want)...)
		}
	}
}

// TestNoSparse: a map of messages holding a nil message fails no_sparse.
func TestNoSparse(t *testing.T) {
	m := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"a": nil, "b": {}}}
	fd := m.ProtoReflect().Descriptor().Fields().ByName("filter_metadata")
	r := func(noSparse bool) *validate.FieldRules {
		return &validate.FieldRules{Type: &validate.FieldRules_Map{Map: &validate.MapRules{NoSparse: proto.Bool(noSparse)}}}
	}
	expect(t, "sparse", apply(t, fieldTypeOf(fd), r(true), fd, m.ProtoReflect().Get(fd), true), "invalid M.F[a]: value cannot be sparse, all pairs must be non-nil")
	expect(t, "sparse allowed", apply(t, fieldTypeOf(fd), r(false), fd, m.ProtoReflect().Get(fd), true))
	delete(m.FilterMetadata, "a")
	expect(t, "not sparse", apply(t, fieldTypeOf(fd), r(true), fd, m.ProtoReflect().Get(fd), true))
}

func TestMessageRules(t *testing.T) {
	ft := fieldType{kind: protoreflect.MessageKind, msg: (&durationpb.Duration{}).ProtoReflect().Descriptor()}
	msg := func(r *validate.MessageRules) *validate.FieldRules { return &validate.FieldRules{Message: r} }
	expect(t, "required unset", apply(t, ft, msg(&validate.MessageRules{Required: proto.Bool(true)}), nil, protoreflect.Value{}, false), "invalid M.F: value is required")
	expect(t, "required set", apply(t, ft, msg(&validate.MessageRules{Required: proto.Bool(true)}), nil, durMsg(1, 0), true))
	expect(t, "unset", apply(t, ft, msg(&validate.MessageRules{}), nil, protoreflect.Value{}, false))

	// Wrappers: the value's rules, under the field's name.
	wft := fieldType{kind: protoreflect.MessageKind, msg: (&wrapperspb.UInt32Value{}).ProtoReflect().Descriptor()}
	wr := &validate.FieldRules{Message: &validate.MessageRules{Required: proto.Bool(true)}, Type: &validate.FieldRules_Uint32{Uint32: &validate.UInt32Rules{Gte: proto.Uint32(1)}}}
	w := func(v uint32) protoreflect.Value {
		return protoreflect.ValueOfMessage(wrapperspb.UInt32(v).ProtoReflect())
	}
	expect(t, "wrapper required", apply(t, wft, wr, nil, protoreflect.Value{}, false), "invalid M.F: value is required and must not be nil.")
	expect(t, "wrapper low", apply(t, wft, wr, nil, w(0), true), "invalid M.F: value must be greater than or equal to 1")
	expect(t, "wrapper ok", apply(t, wft, wr, nil, w(1), true))
	wr.Message = nil
	expect(t, "wrapper unset", apply(t, wft, wr, nil, protoreflect.Value{}, false))

	// Any: the type URL.
	aft := fieldType{kind: protoreflect.MessageKind, msg: (&anypb.Any{}).ProtoReflect().Descriptor()}
	a := func(url string) protoreflect.Value {
		return protoreflect.ValueOfMessage((&anypb.Any{TypeUrl: url}).ProtoReflect())
	}
	ar := func(r *validate.AnyRules) *validate.FieldRules {
		return &validate.FieldRules{Type: &validate.FieldRules_Any{Any: r}}
	}
	expect(t, "any required", apply(t, aft, ar(&validate.AnyRules{Required: proto.Bool(true), In: []string{"x"}}), nil, protoreflect.Value{}, false), "invalid M.F: value is required")
	expect(t, "any unset", apply(t, aft, ar(&validate.AnyRules{In: []string{"x"}}), nil, protoreflect.Value{}, false))
	expect(t, "any in", apply(t, aft, ar(&validate.AnyRules{Required: proto.Bool(true), In: []string{"x", "y"}}), nil, a("y"), true))
	expect(t, "any not in", apply(t, aft, ar(&validate.AnyRules{In: []string{"x", "y"}}), nil, a("z"), true), "invalid M.F: type URL must be in list [x y]")
	expect(t, "any not_in", apply(t, aft, ar(&validate.AnyRules{NotIn: []string{"x", "y"}}), nil, a("y"), true), "invalid M.F: type URL must not be in list [x y]")
	expect(t, "any not_in ok", apply(t, aft, ar(&validate.AnyRules{NotIn: []string{"x", "y"}}), nil, a("z"), true))
	expect(t, "any none", apply(t, aft, ar(&validate.AnyRules{}), nil, a("z"), true))

	// Bool.
	bft := fieldType{kind: protoreflect.BoolKind}
	br := &validate.FieldRules{Type: &validate.FieldRules_Bool{Bool: &validate.BoolRules{Const: proto.Bool(true)}}}
	expect(t, "bool", apply(t, bft, br, nil, protoreflect.ValueOfBool(false), true), "invalid M.F: value must equal true")
	expect(t, "bool ok", apply(t, bft, br, nil, protoreflect.ValueOfBool(true), true))
}
