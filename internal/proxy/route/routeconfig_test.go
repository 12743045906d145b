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
	honoured := map[protoreflect.Name]bool{"name": true, "virtual_hosts": true, "metadata": true, "validate_clusters": true,
		"ignore_port_in_host_matching": true, "max_direct_response_body_size_bytes": true}
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

// TestIgnorePortInHostMatching: with the field the Host header's port is
// dropped before the lookup, so "a.example:8080" selects the virtual host
// of "a.example" even when another one names "a.example:8080"; without it
// the exact domain with the port wins.
func TestIgnorePortInHostMatching(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		rc := &routev3.RouteConfiguration{Name: "r", IgnorePortInHostMatching: ignore, VirtualHosts: []*routev3.VirtualHost{
			{Name: "with-port", Domains: []string{"a.example:8080"}, Routes: []*routev3.Route{to("c1", prefix("/"))}},
			{Name: "bare", Domains: []string{"a.example"}, Routes: []*routev3.Route{to("c2", prefix("/"))}},
		}}
		tbl, err := Compile(rc)
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{false: "with-port", true: "bare"}[ignore]
		for _, host := range []string{"a.example:8080", "A.Example:8080"} {
			if vh := tbl.VirtualHostFor(host); vh == nil || vh.Name != want {
				t.Errorf("ignore_port_in_host_matching %v: %s selects %v, want %s", ignore, host, vh, want)
			}
		}
		if vh := tbl.VirtualHostFor("a.example"); vh == nil || vh.Name != "bare" {
			t.Errorf("ignore_port_in_host_matching %v: a.example selects %v, want bare", ignore, vh)
		}
	}
}

// TestMaxDirectResponseBodySize: a direct response body longer than
// max_direct_response_body_size_bytes (Envoy's default 4096) is refused
// at load, naming the field.
func TestMaxDirectResponseBodySize(t *testing.T) {
	direct := func(n int) *routev3.Route {
		return &routev3.Route{Match: prefix("/"), Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
			Status: 200, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: strings.Repeat("x", n)}}}}}
	}
	for _, tc := range []struct {
		body int
		max  *wrapperspb.UInt32Value
		ok   bool
	}{
		{4096, nil, true},
		{4097, nil, false},
		{4097, wrapperspb.UInt32(5000), true},
		{5000, wrapperspb.UInt32(5000), true},
		{11, wrapperspb.UInt32(10), false},
	} {
		rc := &routev3.RouteConfiguration{Name: "r", MaxDirectResponseBodySizeBytes: tc.max,
			VirtualHosts: []*routev3.VirtualHost{{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{direct(tc.body)}}}}
		_, err := Compile(rc)
		if tc.ok && err != nil {
			t.Errorf("body %d, max %v: %v", tc.body, tc.max, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "max_direct_response_body_size_bytes")) {
			t.Errorf("body %d, max %v: %v, want an error naming max_direct_response_body_size_bytes", tc.body, tc.max, err)
		}
	}
}
