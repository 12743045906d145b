package route

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestRouteConfigurationFields sets each RouteConfiguration field in turn
// (every field the generated type has, so a field added to the API later
// is covered) and checks that the table compiles only for the fields
// strait-proxy honours, and otherwise fails naming the field.
func TestRouteConfigurationFields(t *testing.T) {
	honoured := map[protoreflect.Name]bool{"name": true, "virtual_hosts": true, "metadata": true, "validate_clusters": true}
	fds := (&routev3.RouteConfiguration{}).ProtoReflect().Descriptor().Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		t.Run(string(fd.Name()), func(t *testing.T) {
			rc := &routev3.RouteConfiguration{Name: "r"}
			m := rc.ProtoReflect()
			switch {
			case fd.Name() == "validate_clusters":
				rc.ValidateClusters = wrapperspb.Bool(false)
			case fd.Name() == "virtual_hosts":
				rc.VirtualHosts = []*routev3.VirtualHost{{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{to("c", prefix("/"))}}}
			case fd.Name() == "metadata":
				rc.Metadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"x": {}}}
			case fd.IsList():
				l := m.Mutable(fd).List()
				l.Append(l.NewElement())
			case fd.IsMap():
				mp := m.Mutable(fd).Map()
				mp.Set(protoreflect.ValueOfString("k").MapKey(), mp.NewValue())
			case fd.Kind() == protoreflect.MessageKind:
				m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
			case fd.Kind() == protoreflect.BoolKind:
				m.Set(fd, protoreflect.ValueOfBool(true))
			case fd.Kind() == protoreflect.StringKind:
				m.Set(fd, protoreflect.ValueOfString("x"))
			default:
				t.Fatalf("no test value for field kind %v", fd.Kind())
			}
			if !m.Has(fd) {
				t.Fatalf("test did not set %s", fd.Name())
			}
			_, err := Compile(rc)
			if honoured[fd.Name()] {
				if err != nil {
					t.Fatalf("Compile with %s: %v", fd.Name(), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "route_config."+string(fd.Name())) {
				t.Fatalf("Compile with %s = %v, want an error naming route_config.%s", fd.Name(), err, fd.Name())
			}
		})
	}
}

func TestRouteConfigurationValidateClustersTrueRefused(t *testing.T) {
	_, err := Compile(&routev3.RouteConfiguration{Name: "r", ValidateClusters: wrapperspb.Bool(true)})
	if err == nil || !strings.Contains(err.Error(), "route_config.validate_clusters true") {
		t.Fatalf("Compile = %v, want validate_clusters true refused", err)
	}
}

// TestVirtualHostFields: every VirtualHost field strait-proxy does not
// implement is refused by name.
func TestVirtualHostFields(t *testing.T) {
	fds := (&routev3.VirtualHost{}).ProtoReflect().Descriptor().Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		if virtualHostFields[fd.Name()] || fd.Name() == "cors" {
			continue // honoured (route tests), or refused with its own message (filters.go)
		}
		t.Run(string(fd.Name()), func(t *testing.T) {
			vh := &routev3.VirtualHost{Name: "v", Domains: []string{"*"}}
			m := vh.ProtoReflect()
			switch {
			case fd.IsList():
				l := m.Mutable(fd).List()
				if fd.Kind() == protoreflect.StringKind {
					l.Append(protoreflect.ValueOfString("x"))
				} else {
					l.Append(l.NewElement())
				}
			case fd.IsMap():
				mp := m.Mutable(fd).Map()
				mp.Set(protoreflect.ValueOfString("k").MapKey(), mp.NewValue())
			case fd.Kind() == protoreflect.MessageKind:
				m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
			case fd.Kind() == protoreflect.BoolKind:
				m.Set(fd, protoreflect.ValueOfBool(true))
			case fd.Kind() == protoreflect.EnumKind:
				m.Set(fd, protoreflect.ValueOfEnum(1))
			default:
				t.Fatalf("no test value for field kind %v", fd.Kind())
			}
			_, err := Compile(&routev3.RouteConfiguration{Name: "r", VirtualHosts: []*routev3.VirtualHost{vh}})
			if err == nil || !strings.Contains(err.Error(), "virtual_host."+string(fd.Name())) {
				t.Fatalf("Compile with %s = %v, want an error naming virtual_host.%s", fd.Name(), err, fd.Name())
			}
		})
	}
}
