package support_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/istioconfig/schema"
	"github.com/straitmesh/strait/internal/istioconfig/support"
	"github.com/straitmesh/strait/internal/proxypush"
)

func TestRefusalMessage(t *testing.T) {
	const y = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: vs, namespace: demo}
spec:
  hosts: [echo]
  http:
  - route:
    - destination: {host: echo}
  - retries:
      attempts: 3
    fault:
      abort: {http2Error: REFUSED_STREAM}
    route:
    - destination: {host: echo}
`
	res := istioconfig.ParseFile("f.yaml", []byte(y))
	if len(res.Configs) != 0 || res.Err == nil {
		t.Fatalf("configs %d, err %v: want the document refused", len(res.Configs), res.Err)
	}
	if got, want := res.Err.Error(), "f.yaml: document 1: spec.http[1].fault.abort.http2Error: not supported by Strait yet"; got != want {
		t.Errorf("err = %q, want %q", got, want)
	}
	if !errors.Is(res.Err, istioconfig.ErrNotSupported) {
		t.Error("a refusal does not wrap istioconfig.ErrNotSupported")
	}
	if errors.Is(istioconfig.ParseFile("g.yaml", []byte(strings.Replace(y, "attempts: 3", "attempts: x", 1))).Err, istioconfig.ErrNotSupported) {
		t.Error("an invalid document reads as a refused one")
	}
}

// Every refused field of a document is named, also after another refused
// field or an honoured enum.
func TestRefusalsAllReported(t *testing.T) {
	const y = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: vs}
spec:
  hosts: [echo]
  http:
  - fault: {delay: {exponentialDelay: 1s}}
    retries: {attempts: 3}
    match: [{statPrefix: x}]
    route:
    - destination: {host: echo}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: se}
spec:
  hosts: [a.example.com]
  ports: [{number: 80, name: http}]
  resolution: STATIC
  subjectAltNames: [spiffe://a]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: dr}
spec:
  host: echo
  trafficPolicy:
    outlierDetection: {consecutiveErrors: 5, failurePercentageThreshold: 10, interval: 1s}
`
	var got []string
	for _, fe := range istioconfig.FieldErrors(istioconfig.ParseFile("m.yaml", []byte(y)).Err) {
		got = append(got, fmt.Sprintf("%d %s", fe.Document, fe.Field))
	}
	want := []string{"1 spec.http[0].fault.delay.exponentialDelay", "1 spec.http[0].match[0].statPrefix", "2 spec.subjectAltNames",
		// Two refused fields of one message: both named.
		"3 spec.trafficPolicy.outlierDetection.consecutiveErrors", "3 spec.trafficPolicy.outlierDetection.failurePercentageThreshold"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("refused %q, want %q", got, want)
	}
}

// A header match on a JWT claim needs request authentication: refused.
func TestRefusedJWTClaimMatch(t *testing.T) {
	const y = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: vs}
spec:
  hosts: [echo]
  http:
  - match:
    - headers: {"@request.auth.claims.group": {exact: admin}}
    route:
    - destination: {host: echo}
`
	err := istioconfig.ParseFile("j.yaml", []byte(y)).Err
	if !errors.Is(err, istioconfig.ErrNotSupported) || !strings.Contains(err.Error(), "j.yaml: document 1: spec.http[0].match[0].headers[@request.auth.claims.group]: matching a JWT claim (@request.auth.claims) is not supported by Strait yet") {
		t.Errorf("err = %v", err)
	}
}

// TestRefusals sets, one at a time, every field the registry refuses (whose
// parent is honoured) in a document of its kind, and wants the document
// refused with that field's path named.
func TestRefusals(t *testing.T) {
	n := 0
	for _, f := range support.Table() {
		if f.Support == support.Honoured || !parentHonoured(f.Kind, f.Path) {
			continue
		}
		n++
		spec := schema.NewSpec(f.Kind)
		path, err := setPath(spec.ProtoReflect(), f.Path)
		if err != nil {
			t.Fatalf("%s %s: %v", f.Kind, f.Path, err)
		}
		js, err := protojson.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		y := fmt.Sprintf("apiVersion: %s/v1\nkind: %s\nmetadata: {name: x}\nspec: %s\n", schema.GroupOf(f.Kind), f.Kind, js)
		res := istioconfig.ParseFile("r.yaml", []byte(y))
		want := "spec." + path
		found := false
		for _, fe := range istioconfig.FieldErrors(res.Err) {
			if fe.Field == want && errors.Is(fe, istioconfig.ErrNotSupported) {
				found = true
			}
		}
		if !found || len(res.Configs) != 0 {
			t.Errorf("%s with %s: want %s refused, got %v", f.Kind, f.Path, want, res.Err)
		}
	}
	if n < 10 {
		t.Errorf("only %d refused fields tried", n)
	}
}

// parentHonoured reports whether every proper ancestor of path is honoured
// (the refusal of a field under a refused one is never reached).
func parentHonoured(kind proxypush.Kind, path string) bool {
	if field, _, isValue := strings.Cut(path, "="); isValue {
		return supportOf(kind, field) == support.Honoured && parentHonoured(kind, field)
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		parent := path[:i]
		return supportOf(kind, parent) == support.Honoured && parentHonoured(kind, parent)
	}
	return true
}

// supportOf is the table's state of a kind's field path.
func supportOf(kind proxypush.Kind, path string) support.Support {
	for _, f := range support.Table() {
		if f.Kind == kind && f.Path == path {
			return f.Support
		}
	}
	return support.Refused
}

// setPath sets the field at a registry path (creating the messages, list
// elements and map values on the way) to a non-zero value and returns the
// path with indexes, as a refusal names it.
func setPath(m protoreflect.Message, path string) (string, error) {
	path, enumValue, _ := strings.Cut(path, "=")
	parts := strings.Split(path, ".")
	var out []string
	for i, name := range parts {
		fd := m.Descriptor().Fields().ByJSONName(name)
		if fd == nil {
			return "", fmt.Errorf("no field %q in %s", name, m.Descriptor().FullName())
		}
		last := i == len(parts)-1
		switch {
		case fd.IsList():
			out = append(out, name)
			l := m.Mutable(fd).List()
			if fd.Kind() != protoreflect.MessageKind {
				l.Append(scalar(fd))
				continue
			}
			if l.Len() == 0 {
				l.Append(l.NewElement())
			}
			if !last {
				out[len(out)-1] += "[0]"
				m = l.Get(0).Message()
			}
		case fd.IsMap():
			out = append(out, name)
			mp := m.Mutable(fd).Map()
			key, keyName := protoreflect.ValueOfString("k").MapKey(), "k"
			if fd.MapKey().Kind() != protoreflect.StringKind {
				key, keyName = scalar(fd.MapKey()).MapKey(), "1"
			}
			if fd.MapValue().Kind() != protoreflect.MessageKind {
				mp.Set(key, scalar(fd.MapValue()))
				continue
			}
			if !mp.Has(key) {
				mp.Set(key, mp.NewValue())
			}
			if !last {
				out[len(out)-1] += "[" + keyName + "]"
				m = mp.Mutable(key).Message()
			}
		case fd.Kind() == protoreflect.MessageKind:
			out = append(out, name)
			if fd.Message().FullName() == "google.protobuf.Duration" {
				m.Set(fd, protoreflect.ValueOfMessage((durationpb.New(1e9)).ProtoReflect()))
				continue
			}
			if strings.HasPrefix(string(fd.Message().FullName()), "google.protobuf.") {
				wm := m.Mutable(fd).Message()
				if vf := wm.Descriptor().Fields().ByName("value"); vf != nil {
					wm.Set(vf, scalar(vf))
				}
				continue
			}
			m = m.Mutable(fd).Message()
		default:
			out = append(out, name)
			v := scalar(fd)
			if enumValue != "" {
				v = protoreflect.ValueOfEnum(fd.Enum().Values().ByName(protoreflect.Name(enumValue)).Number())
			}
			m.Set(fd, v)
		}
	}
	return strings.Join(out, "."), nil
}

// scalar is a non-zero value of a scalar field.
func scalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("x")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte("x"))
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(fd.Enum().Values().Get(fd.Enum().Values().Len() - 1).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(1)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(1)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(1)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(1)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(1)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(1)
	}
	panic(fmt.Sprintf("no scalar for %v", fd.Kind()))
}
