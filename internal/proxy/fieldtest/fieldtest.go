// Package fieldtest helps the tests of strait-proxy's field audits: every
// Envoy message strait-proxy accepts has its fields listed as honoured or
// refused, and these helpers check that the lists cover the message's
// descriptor and that a refused field, once set, is refused by name.
package fieldtest

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Classified fails t for each field of d that is in neither honoured nor
// refused, or in both, and for each listed name d does not have (a field
// renamed or dropped by a newer API).
func Classified[H, R any](t testing.TB, d protoreflect.MessageDescriptor, honoured map[protoreflect.Name]H, refused map[protoreflect.Name]R) {
	t.Helper()
	fields := d.Fields()
	for i := range fields.Len() {
		n := fields.Get(i).Name()
		_, h := honoured[n]
		_, r := refused[n]
		switch {
		case h && r:
			t.Errorf("%s.%s is both honoured and refused", d.FullName(), n)
		case !h && !r:
			t.Errorf("%s.%s is neither honoured nor refused: implement it and list it as honoured, or list it as refused", d.FullName(), n)
		}
	}
	for n := range honoured {
		if fields.ByName(n) == nil {
			t.Errorf("honoured %s is not a field of %s", n, d.FullName())
		}
	}
	for n := range refused {
		if fields.ByName(n) == nil {
			t.Errorf("refused %s is not a field of %s", n, d.FullName())
		}
	}
}

// Known fails t for each name in allowed that d does not have.
func Known[V any](t testing.TB, d protoreflect.MessageDescriptor, allowed map[protoreflect.Name]V) {
	t.Helper()
	for n := range allowed {
		if d.Fields().ByName(n) == nil {
			t.Errorf("%s is not a field of %s", n, d.FullName())
		}
	}
}

// SetSomething gives field fd of m a value other than its default: an
// empty message, one element, true, the enum's last value, "x" or 1.
func SetSomething(m protoreflect.Message, fd protoreflect.FieldDescriptor) {
	switch {
	case fd.IsMap():
		mp := m.Mutable(fd).Map()
		k := protoreflect.ValueOfString("x").MapKey()
		if fd.MapValue().Message() != nil {
			mp.Set(k, mp.NewValue())
		} else {
			mp.Set(k, scalar(fd.MapValue()))
		}
	case fd.IsList():
		l := m.Mutable(fd).List()
		if fd.Message() != nil {
			l.Append(l.NewElement())
		} else {
			l.Append(scalar(fd))
		}
	case fd.Message() != nil:
		m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
	default:
		m.Set(fd, scalar(fd))
	}
}

func scalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(vals.Len() - 1).Number())
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("x")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte("x"))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(1)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(1)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(1)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(1)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(1)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(1)
	}
	panic("fieldtest: no value for kind " + fd.Kind().String())
}
