// Package support is the table of the Istio config fields Strait honours
// end to end or refuses, kind by kind (networking.go, authz.go, jwt.go,
// peerauthn.go, gateway.go, telemetry.go): Check refuses a spec that sets a refused
// field, naming it; Table and FieldsMarkdown list the table, which
// docs/istio-fields.md prints (go run ./hack/istiofields).
package support

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/straitmesh/strait/internal/istioconfig/fielderr"
	"github.com/straitmesh/strait/internal/istioconfig/schema"
	"github.com/straitmesh/strait/internal/proxypush"
)

// Support is whether Strait honours a config field end to end (straitd
// generates the Envoy config Istio generates for it, and strait-proxy
// implements that config), or refuses a document that sets it.
type Support int

const (
	// Refused means a document that sets the field is refused with
	// "FIELD: not supported by Strait yet".
	Refused Support = iota
	// Honoured means the field works as in Istio.
	Honoured
)

func (s Support) String() string {
	if s == Honoured {
		return "honoured"
	}
	return "refused"
}

// fieldSupport is the honour-or-refuse registry: for every kind Strait
// loads, the state of every field path of its istio.io/api message tree.
// A path joins JSON field names with "." (elements of a list or values of a
// map collapse: "http.match.headers.exact"); an enum field also has one
// entry per non-zero value ("resolution=DNS"), checked when the field is
// honoured (a zero value cannot be told from an unset field). TestFieldSupportComplete fails when a field of the istio.io/api
// types is missing here, or an entry names no field; docs/istio-fields.md
// is generated from this table (go run ./hack/istiofields).
//
// To honour a field, flip its line to Honoured, in the commit that makes it
// work end to end.
var fieldSupport = map[proxypush.Kind]map[string]Support{
	schema.RequestAuthentication: requestAuthenticationSupport, // jwt.go
	schema.VirtualService:        virtualServiceSupport,        // networking.go
	schema.DestinationRule:       destinationRuleSupport,       // networking.go
	schema.ServiceEntry:          serviceEntrySupport,          // networking.go
	schema.AuthorizationPolicy:   authorizationPolicySupport,   // authz.go
	schema.Sidecar:               sidecarSupport,               // networking.go
	schema.Gateway:               gatewaySupport,               // gateway.go
	schema.PeerAuthentication:    peerAuthenticationSupport,    // peerauthn.go
	schema.WorkloadEntry:         workloadEntrySupport,         // networking.go
	schema.Telemetry:             telemetrySupport,             // telemetry.go
}

// FieldSupport is one entry of the registry.
type FieldSupport struct {
	Kind    proxypush.Kind
	Path    string
	Support Support
}

// Table lists the registry, by kind (in schema.Kinds order) and then in
// the order of the message tree.
func Table() []FieldSupport {
	var out []FieldSupport
	for _, kind := range schema.Kinds {
		for _, p := range fieldPaths(schema.NewSpec(kind).ProtoReflect().Descriptor()) {
			s, ok := fieldSupport[kind][p]
			if !ok {
				s = Refused
			}
			out = append(out, FieldSupport{Kind: kind, Path: p, Support: s})
		}
	}
	return out
}

// fieldPaths lists every field path under md in declaration order, depth
// first, as fieldSupport spells them. Well-known types are leaves.
func fieldPaths(md protoreflect.MessageDescriptor) []string {
	var out []string
	var walk func(prefix string, md protoreflect.MessageDescriptor, stack []protoreflect.FullName)
	walk = func(prefix string, md protoreflect.MessageDescriptor, stack []protoreflect.FullName) {
		for _, name := range stack {
			if name == md.FullName() {
				return // a recursive message: its fields are listed once
			}
		}
		stack = append(stack, md.FullName())
		for i := range md.Fields().Len() {
			fd := md.Fields().Get(i)
			p := joinPath(prefix, fd.JSONName())
			out = append(out, p)
			if fd.Kind() == protoreflect.EnumKind {
				for j := 1; j < fd.Enum().Values().Len(); j++ {
					out = append(out, p+"="+string(fd.Enum().Values().Get(j).Name()))
				}
			}
			if sub := messageOf(fd); sub != nil && !isWellKnown(sub) {
				walk(p, sub, stack)
			}
		}
	}
	walk("", md, nil)
	return out
}

// messageOf is the message type of a field's values (a map's value type),
// or nil.
func messageOf(fd protoreflect.FieldDescriptor) protoreflect.MessageDescriptor {
	if fd.IsMap() {
		if fd.MapValue().Kind() == protoreflect.MessageKind {
			return fd.MapValue().Message()
		}
		return nil
	}
	if fd.Kind() == protoreflect.MessageKind {
		return fd.Message()
	}
	return nil
}

func joinPath(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// Check refuses every set field of a spec of kind whose state is Refused
// (or that the registry does not know), naming it with its indexes
// ("spec.http[0].fault"). The fields under a refused one are not looked at.
func Check(el *fielderr.List, kind proxypush.Kind, spec protoreflect.Message) {
	table := fieldSupport[kind]
	var walk func(path, key string, m protoreflect.Message)
	walk = func(path, key string, m protoreflect.Message) {
		fields := m.Descriptor().Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			if !m.Has(fd) {
				continue
			}
			k := joinPath(key, fd.JSONName())
			p := path + "." + fd.JSONName()
			if table[k] != Honoured {
				el.AddErr(p, fielderr.ErrNotSupported)
				continue
			}
			v := m.Get(fd)
			if fd.Kind() == protoreflect.EnumKind && !fd.IsList() && !fd.IsMap() {
				name := enumValueName(fd, v.Enum())
				if s, ok := table[k+"="+name]; ok && s != Honoured {
					el.AddErr(p, fmt.Errorf("%s %w", name, fielderr.ErrNotSupported))
				}
				continue
			}
			sub := messageOf(fd)
			if sub == nil || isWellKnown(sub) {
				continue
			}
			switch {
			case fd.IsMap():
				var keys []protoreflect.MapKey
				v.Map().Range(func(mk protoreflect.MapKey, _ protoreflect.Value) bool {
					keys = append(keys, mk)
					return true
				})
				sort.Slice(keys, func(i, j int) bool { return mapKeyLess(keys[i], keys[j]) })
				for _, mk := range keys {
					walk(fmt.Sprintf("%s[%s]", p, mk.String()), k, v.Map().Get(mk).Message())
				}
			case fd.IsList():
				for j := range v.List().Len() {
					walk(fmt.Sprintf("%s[%d]", p, j), k, v.List().Get(j).Message())
				}
			default:
				walk(p, k, v.Message())
			}
		}
	}
	walk("spec", "", spec)
}

// mapKeyLess orders map keys: numbers by value (portLevelMtls is keyed
// by port), strings by bytes.
func mapKeyLess(a, b protoreflect.MapKey) bool {
	switch a.Interface().(type) {
	case uint32, uint64:
		return a.Uint() < b.Uint()
	case int32, int64:
		return a.Int() < b.Int()
	}
	return a.String() < b.String()
}

func enumValueName(fd protoreflect.FieldDescriptor, n protoreflect.EnumNumber) string {
	if ev := fd.Enum().Values().ByNumber(n); ev != nil {
		return string(ev.Name())
	}
	return fmt.Sprint(n)
}

// FieldsMarkdown renders the registry as docs/istio-fields.md.
func FieldsMarkdown() []byte {
	var b strings.Builder
	b.WriteString("# Istio fields in Strait\n\n")
	b.WriteString("Generated by `go run ./hack/istiofields` from `internal/istioconfig/support`; do not edit.\n\n")
	b.WriteString("Every field of the istio.io/api types Strait loads is either **honoured** end to end\n")
	b.WriteString("(straitd generates the Envoy config Istio generates for it and strait-proxy implements it)\n")
	b.WriteString("or **refused**: a document that sets it is not loaded, with the message\n")
	b.WriteString("`FILE: document N: FIELD: not supported by Strait yet` (in Kubernetes mode, logged at WARN\n")
	b.WriteString("with the object's name and written on the object's `status.validationMessages`, code\n")
	b.WriteString("`STR0001`, until it is fixed). Paths join field names with `.`; list elements and map values\n")
	b.WriteString("collapse (`http.match.headers.exact`). `field=VALUE` rows are the values of an enum; its\n")
	b.WriteString("zero value is what an unset field means and is governed by the field's own row.\n")
	tbl := Table()
	for _, kind := range schema.Kinds {
		honoured, total := 0, 0
		for _, f := range tbl {
			if f.Kind == kind {
				total++
				if f.Support == Honoured {
					honoured++
				}
			}
		}
		fmt.Fprintf(&b, "\n## %s\n\n%d of %d honoured.\n\n| Field | State |\n|---|---|\n", kind, honoured, total)
		for _, f := range tbl {
			if f.Kind == kind {
				fmt.Fprintf(&b, "| `%s` | %s |\n", f.Path, f.Support)
			}
		}
	}
	return []byte(b.String())
}

// isWellKnown reports whether md is a google.protobuf type: a leaf of the
// table (a Duration is one field, not its seconds and nanos).
func isWellKnown(md protoreflect.MessageDescriptor) bool {
	return strings.HasPrefix(string(md.FullName()), "google.protobuf.")
}
