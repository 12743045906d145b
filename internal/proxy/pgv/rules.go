package pgv

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/envoyproxy/protoc-gen-validate/validate"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ruleKind is the template protoc-gen-validate renders for a field
// (templates/shared/context.go, resolveRules).
type ruleKind uint8

const (
	kindNone ruleKind = iota
	kindMessage
	kindRepeated
	kindMap
	kindString
	kindBytes
	kindBool
	kindEnum
	kindNumber
	kindAny
	kindDuration
	kindWrapper
)

// ruleCtx is one field's (or one item's, key's, value's) compiled rules,
// protoc-gen-validate's RuleContext.
type ruleCtx struct {
	kind    ruleKind
	message *validate.MessageRules // message, wrapper (required)

	str     *validate.StringRules
	re      *regexp.Regexp // str.Pattern (or its well_known_regex) or bytes.Pattern
	pattern string
	bytes   *validate.BytesRules
	boolean *validate.BoolRules
	enum    *validate.EnumRules
	enumD   protoreflect.EnumDescriptor
	// singularEnum: the field itself is an enum (not a list or map of
	// them): errors name enum values, as the templates' isEnum.
	singularEnum bool
	num          numberCheck
	repeated     *validate.RepeatedRules
	mapR         *validate.MapRules
	anyR         *validate.AnyRules
	duration     *validate.DurationRules

	elem, key *ruleCtx // repeated items, map values; map keys
	inner     *ruleCtx // wrapper: the rules of its value
}

// fieldType is what resolveRules looks at: the field's type, or its
// element's.
type fieldType struct {
	repeated, isMap bool
	kind            protoreflect.Kind
	enum            protoreflect.EnumDescriptor
	msg             protoreflect.MessageDescriptor
}

func (t fieldType) embed() bool {
	return !t.repeated && !t.isMap && (t.kind == protoreflect.MessageKind || t.kind == protoreflect.GroupKind)
}

func resolve(t fieldType, rules *validate.FieldRules, fd protoreflect.FieldDescriptor) (*ruleCtx, error) {
	rc := &ruleCtx{message: rules.GetMessage()}
	wrapped := false
	var err error
	switch r := rules.GetType().(type) {
	case *validate.FieldRules_Float:
		rc.num, err = newNumber(r.Float.Const, r.Float.Lt, r.Float.Lte, r.Float.Gt, r.Float.Gte, r.Float.In, r.Float.NotIn, r.Float.GetIgnoreEmpty(), func(v protoreflect.Value) float32 { return float32(v.Float()) })
		rc.kind, wrapped = kindNumber, t.embed()
	case *validate.FieldRules_Double:
		rc.num, err = newNumber(r.Double.Const, r.Double.Lt, r.Double.Lte, r.Double.Gt, r.Double.Gte, r.Double.In, r.Double.NotIn, r.Double.GetIgnoreEmpty(), protoreflect.Value.Float)
		rc.kind, wrapped = kindNumber, t.embed()
	case *validate.FieldRules_Int32:
		rc.num, err = newNumber(r.Int32.Const, r.Int32.Lt, r.Int32.Lte, r.Int32.Gt, r.Int32.Gte, r.Int32.In, r.Int32.NotIn, r.Int32.GetIgnoreEmpty(), int32Of)
		rc.kind, wrapped = kindNumber, t.embed()
	case *validate.FieldRules_Int64:
		rc.num, err = newNumber(r.Int64.Const, r.Int64.Lt, r.Int64.Lte, r.Int64.Gt, r.Int64.Gte, r.Int64.In, r.Int64.NotIn, r.Int64.GetIgnoreEmpty(), protoreflect.Value.Int)
		rc.kind, wrapped = kindNumber, t.embed()
	case *validate.FieldRules_Uint32:
		rc.num, err = newNumber(r.Uint32.Const, r.Uint32.Lt, r.Uint32.Lte, r.Uint32.Gt, r.Uint32.Gte, r.Uint32.In, r.Uint32.NotIn, r.Uint32.GetIgnoreEmpty(), uint32Of)
		rc.kind, wrapped = kindNumber, t.embed()
	case *validate.FieldRules_Uint64:
		rc.num, err = newNumber(r.Uint64.Const, r.Uint64.Lt, r.Uint64.Lte, r.Uint64.Gt, r.Uint64.Gte, r.Uint64.In, r.Uint64.NotIn, r.Uint64.GetIgnoreEmpty(), protoreflect.Value.Uint)
		rc.kind, wrapped = kindNumber, t.embed()
	case *validate.FieldRules_Sint32:
		rc.num, err = newNumber(r.Sint32.Const, r.Sint32.Lt, r.Sint32.Lte, r.Sint32.Gt, r.Sint32.Gte, r.Sint32.In, r.Sint32.NotIn, r.Sint32.GetIgnoreEmpty(), int32Of)
		rc.kind = kindNumber
	case *validate.FieldRules_Sint64:
		rc.num, err = newNumber(r.Sint64.Const, r.Sint64.Lt, r.Sint64.Lte, r.Sint64.Gt, r.Sint64.Gte, r.Sint64.In, r.Sint64.NotIn, r.Sint64.GetIgnoreEmpty(), protoreflect.Value.Int)
		rc.kind = kindNumber
	case *validate.FieldRules_Fixed32:
		rc.num, err = newNumber(r.Fixed32.Const, r.Fixed32.Lt, r.Fixed32.Lte, r.Fixed32.Gt, r.Fixed32.Gte, r.Fixed32.In, r.Fixed32.NotIn, r.Fixed32.GetIgnoreEmpty(), uint32Of)
		rc.kind = kindNumber
	case *validate.FieldRules_Fixed64:
		rc.num, err = newNumber(r.Fixed64.Const, r.Fixed64.Lt, r.Fixed64.Lte, r.Fixed64.Gt, r.Fixed64.Gte, r.Fixed64.In, r.Fixed64.NotIn, r.Fixed64.GetIgnoreEmpty(), protoreflect.Value.Uint)
		rc.kind = kindNumber
	case *validate.FieldRules_Sfixed32:
		rc.num, err = newNumber(r.Sfixed32.Const, r.Sfixed32.Lt, r.Sfixed32.Lte, r.Sfixed32.Gt, r.Sfixed32.Gte, r.Sfixed32.In, r.Sfixed32.NotIn, r.Sfixed32.GetIgnoreEmpty(), int32Of)
		rc.kind = kindNumber
	case *validate.FieldRules_Sfixed64:
		rc.num, err = newNumber(r.Sfixed64.Const, r.Sfixed64.Lt, r.Sfixed64.Lte, r.Sfixed64.Gt, r.Sfixed64.Gte, r.Sfixed64.In, r.Sfixed64.NotIn, r.Sfixed64.GetIgnoreEmpty(), protoreflect.Value.Int)
		rc.kind = kindNumber
	case *validate.FieldRules_Bool:
		rc.kind, rc.boolean, wrapped = kindBool, r.Bool, t.embed()
	case *validate.FieldRules_String_:
		rc.kind, rc.str, wrapped = kindString, r.String_, t.embed()
		err = rc.compileString()
	case *validate.FieldRules_Bytes:
		rc.kind, rc.bytes, wrapped = kindBytes, r.Bytes, t.embed()
		if p := r.Bytes.Pattern; p != nil {
			rc.re, err = pattern(*p)
		}
		if r.Bytes.GetWellKnown() != nil && !r.Bytes.GetIp() && !r.Bytes.GetIpv4() && !r.Bytes.GetIpv6() {
			err = errors.New("unsupported bytes rule")
		}
	case *validate.FieldRules_Enum:
		rc.kind, rc.enum, rc.enumD = kindEnum, r.Enum, t.enum
		rc.singularEnum = fd != nil && !fd.IsList() && !fd.IsMap()
	case *validate.FieldRules_Repeated:
		rc.kind, rc.repeated = kindRepeated, r.Repeated
	case *validate.FieldRules_Map:
		rc.kind, rc.mapR = kindMap, r.Map
	case *validate.FieldRules_Any:
		rc.kind, rc.anyR = kindAny, r.Any
	case *validate.FieldRules_Duration:
		rc.kind, rc.duration = kindDuration, r.Duration
		if len(r.Duration.In) > 0 || len(r.Duration.NotIn) > 0 {
			err = errors.New("unsupported duration rule in/not_in")
		}
	case nil:
		switch {
		case t.repeated:
			rc.kind, rc.repeated = kindRepeated, &validate.RepeatedRules{}
		case t.isMap && t.kind == protoreflect.MessageKind:
			rc.kind, rc.mapR = kindMap, &validate.MapRules{}
		case t.embed():
			rc.kind = kindMessage
		}
	default:
		err = fmt.Errorf("unsupported rule type %T", r)
	}
	if err != nil {
		return nil, err
	}
	// The items, values and keys (shared/context.go: Elem and Key).
	switch rc.kind {
	case kindRepeated:
		if rc.elem, err = resolve(fieldType{kind: t.kind, enum: t.enum, msg: t.msg}, rc.repeated.GetItems(), fd); err != nil {
			return nil, err
		}
	case kindMap:
		if rc.elem, err = resolve(fieldType{kind: t.kind, enum: t.enum, msg: t.msg}, rc.mapR.GetValues(), fd); err != nil {
			return nil, err
		}
		if fd != nil && fd.IsMap() {
			k := fd.MapKey()
			if rc.key, err = resolve(fieldType{kind: k.Kind()}, rc.mapR.GetKeys(), fd); err != nil {
				return nil, err
			}
		}
	}
	if wrapped {
		inner := *rc
		inner.message = nil
		return &ruleCtx{kind: kindWrapper, message: rc.message, inner: &inner}, nil
	}
	return shared(rc), nil
}

// The rules of most fields are one of these (no rules, or a message,
// list or map of messages checked by their own rules only): one shared
// value each, and fields with no rules are not kept at all, so that a
// compiled type holds only what it checks.
var (
	noRules       = &ruleCtx{kind: kindNone}
	plainMessage  = &ruleCtx{kind: kindMessage}
	plainMessages = &ruleCtx{kind: kindRepeated, repeated: &validate.RepeatedRules{}, elem: plainMessage}
	plainMap      = &ruleCtx{kind: kindMap, mapR: &validate.MapRules{}, elem: plainMessage, key: noRules}
)

func shared(rc *ruleCtx) *ruleCtx {
	switch rc.kind {
	case kindNone:
		return noRules
	case kindMessage:
		if rc.message == nil {
			return plainMessage
		}
	case kindRepeated:
		if proto.Size(rc.repeated) == 0 {
			switch rc.elem {
			case noRules:
				return noRules // no count, no unique, items unchecked
			case plainMessage:
				return plainMessages
			}
		}
	case kindMap:
		if proto.Size(rc.mapR) == 0 && (rc.key == nil || rc.key == noRules) {
			switch rc.elem {
			case noRules:
				return noRules
			case plainMessage:
				return plainMap
			}
		}
	}
	return rc
}

func int32Of(v protoreflect.Value) int32   { return int32(v.Int()) }
func uint32Of(v protoreflect.Value) uint32 { return uint32(v.Uint()) }

// loc is what an error names: a field, or an item of a list or map
// field ("Name[index]", "Name[]" for an empty key, as the generated
// fmt.Sprintf("Name[%v]", key)), formatted only for an error.
type loc struct {
	field string
	list  bool
	index int
	key   protoreflect.MapKey // a map item's, when valid
}

func (l loc) String() string {
	switch {
	case l.list:
		return fmt.Sprintf("%s[%v]", l.field, l.index)
	case l.key.IsValid():
		return fmt.Sprintf("%s[%v]", l.field, l.key.Interface())
	}
	return l.field
}

// report collects one message's violations; the checks append to it
// (no closures: validating a valid message allocates little).
type report struct {
	msg  string // the message's Go type name
	errs []error
}

func (r *report) fail(at loc, reason string) {
	r.errs = append(r.errs, FieldError{Message: r.msg, Field: at.String(), Reason: reason})
}

func (r *report) failCause(at loc, reason string, cause error) {
	r.errs = append(r.errs, FieldError{Message: r.msg, Field: at.String(), Reason: reason, Cause: cause})
}

// check applies rc to v (has: the field is set, for messages: non-nil)
// at at: the field or one of its items.
func (rc *ruleCtx) check(rep *report, at loc, v protoreflect.Value, has bool, fd protoreflect.FieldDescriptor) {
	switch rc.kind {
	case kindNone:
	case kindMessage:
		if rc.message.GetRequired() && !has {
			rep.fail(at, "value is required")
		}
		if rc.message.GetSkip() || !has {
			return
		}
		if err := validateMessage(v.Message()); err != nil {
			rep.failCause(at, "embedded message failed validation", err)
		}
	case kindWrapper:
		if has {
			w := v.Message()
			inner := w.Get(w.Descriptor().Fields().ByNumber(1))
			// Unwrapped, the rules name the field without its index
			// (shared/context.go: Unwrap drops it).
			rc.inner.check(rep, loc{field: at.field}, inner, true, fd)
		} else if rc.message.GetRequired() {
			rep.fail(at, "value is required and must not be nil.")
		}
	case kindString:
		rc.checkString(rep, at, v.String())
	case kindBytes:
		rc.checkBytes(rep, at, v.Bytes())
	case kindBool:
		if c := rc.boolean.Const; c != nil && v.Bool() != *c {
			rep.fail(at, fmt.Sprint("value must equal ", *c))
		}
	case kindNumber:
		for _, reason := range rc.num.check(v) {
			rep.fail(at, reason)
		}
	case kindEnum:
		rc.checkEnum(rep, at, v.Enum())
	case kindRepeated:
		rc.checkRepeated(rep, at, v.List(), fd)
	case kindMap:
		rc.checkMap(rep, at, v.Map(), fd)
	case kindAny:
		if rc.anyR.GetRequired() && !has {
			rep.fail(at, "value is required")
		}
		if !has {
			return
		}
		a := v.Message()
		typeURL := a.Get(a.Descriptor().Fields().ByNumber(1)).String()
		if in := rc.anyR.In; len(in) > 0 {
			if !slices.Contains(in, typeURL) {
				rep.fail(at, fmt.Sprint("type URL must be in list ", in))
			}
		} else if notIn := rc.anyR.NotIn; len(notIn) > 0 && slices.Contains(notIn, typeURL) {
			rep.fail(at, fmt.Sprint("type URL must not be in list ", notIn))
		}
	case kindDuration:
		rc.checkDuration(rep, at, v, has)
	}
}

// enumName is the first name of an enum number (shared/enums.go:
// enumNamesMap), "" for an undefined one.
func (rc *ruleCtx) enumName(n int32) string {
	if v := rc.enumD.Values().ByNumber(protoreflect.EnumNumber(n)); v != nil {
		return string(v.Name())
	}
	return ""
}

func (rc *ruleCtx) enumList(list []int32) string {
	if !rc.singularEnum {
		return fmt.Sprint(list)
	}
	names := make([]string, len(list))
	for i, n := range list {
		names[i] = rc.enumName(n)
	}
	return "[" + strings.Join(names, " ") + "]"
}

func (rc *ruleCtx) checkEnum(rep *report, at loc, e protoreflect.EnumNumber) {
	r := rc.enum
	n := int32(e)
	if r.Const != nil && n != *r.Const {
		if rc.singularEnum {
			rep.fail(at, "value must equal "+rc.enumName(*r.Const))
		} else {
			rep.fail(at, fmt.Sprint("value must equal ", *r.Const))
		}
	}
	if len(r.In) > 0 {
		if !slices.Contains(r.In, n) {
			rep.fail(at, "value must be in list "+rc.enumList(r.In))
		}
	} else if len(r.NotIn) > 0 && slices.Contains(r.NotIn, n) {
		rep.fail(at, "value must not be in list "+rc.enumList(r.NotIn))
	}
	if r.GetDefinedOnly() && rc.enumD.Values().ByNumber(e) == nil {
		rep.fail(at, "value must be one of the defined enum values")
	}
}

func (rc *ruleCtx) checkRepeated(rep *report, at loc, l protoreflect.List, fd protoreflect.FieldDescriptor) {
	r := rc.repeated
	n := uint64(l.Len())
	if r.GetIgnoreEmpty() && n == 0 {
		return
	}
	switch {
	case r.GetMinItems() != 0 && r.GetMinItems() == r.GetMaxItems():
		if n != r.GetMinItems() {
			rep.fail(at, fmt.Sprint("value must contain exactly ", r.GetMinItems(), " item(s)"))
		}
	case r.GetMinItems() != 0 && r.MaxItems != nil:
		if n < r.GetMinItems() || n > r.GetMaxItems() {
			rep.fail(at, fmt.Sprint("value must contain between ", r.GetMinItems(), " and ", r.GetMaxItems(), " items, inclusive"))
		}
	case r.GetMinItems() != 0:
		if n < r.GetMinItems() {
			rep.fail(at, fmt.Sprint("value must contain at least ", r.GetMinItems(), " item(s)"))
		}
	case r.MaxItems != nil:
		if n > r.GetMaxItems() {
			rep.fail(at, fmt.Sprint("value must contain no more than ", r.GetMaxItems(), " item(s)"))
		}
	}
	if !r.GetUnique() && rc.elem.kind == kindNone {
		return
	}
	var seen map[any]struct{}
	if r.GetUnique() {
		seen = make(map[any]struct{}, l.Len())
	}
	for i := range l.Len() {
		v := l.Get(i)
		item := loc{field: at.field, list: true, index: i}
		if seen != nil {
			k := v.Interface()
			if b, ok := k.([]byte); ok {
				k = string(b)
			}
			if _, dup := seen[k]; dup {
				rep.fail(item, "repeated value must contain unique items")
			} else {
				seen[k] = struct{}{}
			}
		}
		rc.elem.check(rep, item, v, true, fd)
	}
}

func (rc *ruleCtx) checkMap(rep *report, at loc, m protoreflect.Map, fd protoreflect.FieldDescriptor) {
	r := rc.mapR
	n := uint64(m.Len())
	if r.GetIgnoreEmpty() && n == 0 {
		return
	}
	switch {
	case r.GetMinPairs() != 0 && r.GetMinPairs() == r.GetMaxPairs():
		if n != r.GetMinPairs() {
			rep.fail(at, fmt.Sprint("value must contain exactly ", r.GetMinPairs(), " pair(s)"))
		}
	case r.GetMinPairs() != 0 && r.MaxPairs != nil:
		if n < r.GetMinPairs() || n > r.GetMaxPairs() {
			rep.fail(at, fmt.Sprint("value must contain between ", r.GetMinPairs(), " and ", r.GetMaxPairs(), " pairs, inclusive"))
		}
	case r.GetMinPairs() != 0:
		if n < r.GetMinPairs() {
			rep.fail(at, fmt.Sprint("value must contain at least ", r.GetMinPairs(), " pair(s)"))
		}
	case r.MaxPairs != nil:
		if n > r.GetMaxPairs() {
			rep.fail(at, fmt.Sprint("value must contain no more than ", r.GetMaxPairs(), " pair(s)"))
		}
	}
	keyNone := rc.key == nil || rc.key.kind == kindNone
	if !r.GetNoSparse() && rc.elem.kind == kindNone && keyNone {
		return
	}
	// Sorted keys: the generated code's order, and so its output's.
	keys := make([]protoreflect.MapKey, 0, m.Len())
	m.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		keys = append(keys, k)
		return true
	})
	slices.SortFunc(keys, compareKeys)
	for _, k := range keys {
		val := m.Get(k)
		item := loc{field: at.field, key: k}
		if r.GetNoSparse() {
			if msgVal, ok := val.Interface().(protoreflect.Message); ok && !msgVal.IsValid() {
				rep.fail(item, "value cannot be sparse, all pairs must be non-nil")
			}
		}
		if !keyNone {
			rc.key.check(rep, item, k.Value(), true, fd)
		}
		has := true
		if msgVal, ok := val.Interface().(protoreflect.Message); ok {
			has = msgVal.IsValid()
		}
		rc.elem.check(rep, item, val, has, fd)
	}
}

func compareKeys(a, b protoreflect.MapKey) int {
	switch x := a.Interface().(type) {
	case string:
		return cmp.Compare(x, b.String())
	case int32, int64:
		return cmp.Compare(a.Int(), b.Int())
	case uint32, uint64:
		return cmp.Compare(a.Uint(), b.Uint())
	case bool:
		return cmp.Compare(boolInt(x), boolInt(b.Bool()))
	}
	return 0
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
