// Package pgv checks a protobuf message against the protoc-gen-validate
// rules (the validate.rules field options, validate.required oneof
// options) carried in its descriptor, as the ValidateAll methods that
// protoc-gen-validate generates for go-control-plane and cncf/xds do:
// the same rules, in the same order, with the same error text.
//
// It exists for the sidecar's footprint (issue #24): a call to a generated
// ValidateAll keeps every generated validator of every linked message type
// in the binary (each one calls its fields' validators through an
// interface, so the linker keeps the method on every type that has it),
// ~5 MiB of text, tables and pclntab that a sidecar maps at start. The
// descriptors this package reads are linked anyway (protobuf's decoder
// needs them), and a message type's rules are compiled on its first use.
//
// The templates it follows are protoc-gen-validate's Go templates
// (templates/goshared, templates/go in github.com/envoyproxy/protoc-gen-validate);
// pgv_test.go compares it with the generated methods message by message.
package pgv

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"

	"github.com/envoyproxy/protoc-gen-validate/validate"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// FieldError is one violated rule, as a generated XValidationError: Error
// reads "invalid Cluster.Name: value length must be at least 1 runes".
type FieldError struct {
	Message string // the Go type name of the message holding the field
	Field   string // the Go field name, with [index] or [key] for items
	Reason  string
	Cause   error // the embedded message's errors
	Key     bool
}

func (e FieldError) Error() string {
	cause := ""
	if e.Cause != nil {
		cause = fmt.Sprintf(" | caused by: %v", e.Cause)
	}
	key := ""
	if e.Key {
		key = "key for "
	}
	return fmt.Sprintf("invalid %s%s.%s: %s%s", key, e.Message, e.Field, e.Reason, cause)
}

// MultiError is every violation of one message, as a generated
// XMultiError: the messages joined by "; ".
type MultiError []error

func (m MultiError) Error() string {
	msgs := make([]string, 0, len(m))
	for _, err := range m {
		msgs = append(msgs, err.Error())
	}
	return strings.Join(msgs, "; ")
}

// AllErrors returns the violations.
func (m MultiError) AllErrors() []error { return m }

// ValidateAll returns every violation of m's rules (a MultiError), or nil.
// A message type that protoc-gen-validate did not generate validators
// for (see validated) passes, as it has no ValidateAll to call.
func ValidateAll(m proto.Message) error {
	if m == nil {
		return nil
	}
	return validateMessage(m.ProtoReflect())
}

func validateMessage(m protoreflect.Message) error {
	if !m.IsValid() {
		return nil // a nil message: the generated method returns nil
	}
	mr, err := rulesOf(m)
	if err != nil {
		return err
	}
	if mr == nil {
		return nil
	}
	rep := report{msg: mr.goName}
	for i := range mr.fields {
		f := &mr.fields[i]
		has := m.Has(f.fd)
		var v protoreflect.Value
		if has || f.fd.Cardinality() == protoreflect.Repeated || f.fd.Message() == nil {
			v = m.Get(f.fd) // a scalar's default or an empty list when unset; a message only when set
		}
		f.check.check(&rep, loc{field: f.goName}, v, has, f.fd)
	}
	for i := range mr.oneofs {
		o := &mr.oneofs[i]
		set := m.WhichOneof(o.od)
		if set == nil {
			if o.required {
				rep.fail(loc{field: o.goName}, "value is required")
			}
			continue
		}
		for j := range o.fields {
			f := &o.fields[j]
			if f.fd == set {
				f.check.check(&rep, loc{field: f.goName}, m.Get(f.fd), true, f.fd)
			}
		}
	}
	for i := range mr.synthetic {
		f := &mr.synthetic[i]
		if m.Has(f.fd) {
			f.check.check(&rep, loc{field: f.goName}, m.Get(f.fd), true, f.fd)
		}
	}
	if len(rep.errs) > 0 {
		return MultiError(rep.errs)
	}
	return nil
}

// msgRules is one message type's compiled rules, in the order the
// generated validate method checks them: the fields outside oneofs, the
// oneofs, the proto3 optional fields.
type msgRules struct {
	goName    string
	fields    []fieldRules
	oneofs    []oneofRules
	synthetic []fieldRules
}

type fieldRules struct {
	fd     protoreflect.FieldDescriptor
	goName string
	check  *ruleCtx
}

type oneofRules struct {
	od       protoreflect.OneofDescriptor
	goName   string
	required bool
	fields   []fieldRules
}

// cache maps a message descriptor to its *msgRules (nil: the type has no
// generated validator). Compiled once per type, on first use.
var cache sync.Map

type compiled struct {
	rules *msgRules
	err   error
}

func rulesOf(m protoreflect.Message) (*msgRules, error) {
	md := m.Descriptor()
	if c, ok := cache.Load(md); ok {
		c := c.(compiled)
		return c.rules, c.err
	}
	goType := reflect.TypeOf(m.Interface())
	var c compiled
	if validated(goType) {
		c.rules, c.err = compileMessage(md, goType)
	}
	cache.Store(md, c)
	return c.rules, c.err
}

// validated reports whether protoc-gen-validate generated validators for
// a message's Go type: go-control-plane's and cncf/xds's packages (their
// every .proto has a .pb.validate.go), not protobuf's well-known types,
// googleapis, OpenTelemetry or Istio, whose messages embedded in Envoy's
// are not checked by the generated code either (they have no ValidateAll).
// TestValidatedMatchesGenerated holds this to the linked types.
func validated(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	p := t.PkgPath()
	return strings.HasPrefix(p, "github.com/envoyproxy/go-control-plane/") || strings.HasPrefix(p, "github.com/cncf/xds/go/")
}

func compileMessage(md protoreflect.MessageDescriptor, goType reflect.Type) (*msgRules, error) {
	if goType.Kind() == reflect.Pointer {
		goType = goType.Elem()
	}
	mr := &msgRules{goName: goType.Name()}
	if opts := md.Options(); opts != nil {
		if proto.GetExtension(opts, validate.E_Disabled).(bool) {
			return nil, nil
		}
		if proto.GetExtension(opts, validate.E_Ignored).(bool) {
			return nil, nil
		}
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			continue
		}
		rc, err := fieldContext(fd)
		if err != nil {
			return nil, fmt.Errorf("pgv: %s.%s: %w", md.FullName(), fd.Name(), err)
		}
		if rc == noRules {
			continue
		}
		fr := fieldRules{fd: fd, goName: goCamelCase(string(fd.Name())), check: rc}
		if fd.ContainingOneof() != nil {
			mr.synthetic = append(mr.synthetic, fr)
		} else {
			mr.fields = append(mr.fields, fr)
		}
	}
	oneofs := md.Oneofs()
	for i := range oneofs.Len() {
		od := oneofs.Get(i)
		if od.IsSynthetic() {
			continue
		}
		or := oneofRules{od: od, goName: goCamelCase(string(od.Name()))}
		if opts := od.Options(); opts != nil {
			or.required = proto.GetExtension(opts, validate.E_Required).(bool)
		}
		ofs := od.Fields()
		for j := range ofs.Len() {
			fd := ofs.Get(j)
			rc, err := fieldContext(fd)
			if err != nil {
				return nil, fmt.Errorf("pgv: %s.%s: %w", md.FullName(), fd.Name(), err)
			}
			if rc != noRules {
				or.fields = append(or.fields, fieldRules{fd: fd, goName: goCamelCase(string(fd.Name())), check: rc})
			}
		}
		if or.required || len(or.fields) > 0 {
			mr.oneofs = append(mr.oneofs, or)
		}
	}
	return mr, nil
}

func fieldContext(fd protoreflect.FieldDescriptor) (*ruleCtx, error) {
	var rules *validate.FieldRules
	if opts := fd.Options(); opts != nil {
		rules, _ = proto.GetExtension(opts, validate.E_Rules).(*validate.FieldRules)
	}
	var ft fieldType
	switch {
	case fd.IsList():
		ft = fieldType{repeated: true, kind: fd.Kind(), enum: fd.Enum(), msg: fd.Message()}
	case fd.IsMap():
		ft = fieldType{isMap: true, kind: fd.MapValue().Kind(), enum: fd.MapValue().Enum(), msg: fd.MapValue().Message()}
	default:
		ft = fieldType{kind: fd.Kind(), enum: fd.Enum(), msg: fd.Message()}
	}
	return resolve(ft, rules, fd)
}

// goCamelCase is protoc-gen-go's name for a field or oneof (the name the
// generated errors print), as google.golang.org/protobuf/internal/strs.GoCamelCase.
func goCamelCase(s string) string {
	var b []byte
	lower := func(c byte) bool { return 'a' <= c && c <= 'z' }
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.' && i+1 < len(s) && lower(s[i+1]):
		case c == '.':
			b = append(b, '_')
		case c == '_' && (i == 0 || s[i-1] == '.'):
			b = append(b, 'X')
		case c == '_' && i+1 < len(s) && lower(s[i+1]):
		case '0' <= c && c <= '9':
			b = append(b, c)
		default:
			if lower(c) {
				c -= 'a' - 'A'
			}
			b = append(b, c)
			for ; i+1 < len(s) && lower(s[i+1]); i++ {
				b = append(b, s[i+1])
			}
		}
	}
	return string(b)
}

// patterns caches compiled regular expressions by pattern (many fields
// share Envoy's header patterns).
var patterns sync.Map

func pattern(p string) (*regexp.Regexp, error) {
	if re, ok := patterns.Load(p); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	patterns.Store(p, re)
	return re, nil
}
