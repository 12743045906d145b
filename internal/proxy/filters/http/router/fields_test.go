package router

import (
	"strings"
	"testing"

	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/fieldtest"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// TestRouterFieldsClassified: every field of the Router config is
// honoured or refused, so that a newer API's field is noticed here.
func TestRouterFieldsClassified(t *testing.T) {
	fieldtest.Classified(t, (&routerv3.Router{}).ProtoReflect().Descriptor(), routerHonoured, routerRefused)
}

// TestRouterBuild: Router{} and no config build the terminal router; each
// refused field, set, an unknown field and another config type are errors
// naming what is wrong.
func TestRouterBuild(t *testing.T) {
	for _, typed := range []*anypb.Any{nil, mustAny(t, &routerv3.Router{})} {
		f, err := Factory{}.Build(typed, httpfilter.BuildContext{})
		if err != nil {
			t.Fatalf("Build(%v): %v", typed, err)
		}
		if _, ok := f.(httpfilter.Terminal); !ok || f.Name() != Name {
			t.Errorf("Build = %T %q, want the terminal %s", f, f.Name(), Name)
		}
	}
	fields := (&routerv3.Router{}).ProtoReflect().Descriptor().Fields()
	for n := range routerRefused {
		r := &routerv3.Router{}
		fieldtest.SetSomething(r.ProtoReflect(), fields.ByName(n))
		if _, err := (Factory{}).Build(mustAny(t, r), httpfilter.BuildContext{}); err == nil || !strings.Contains(err.Error(), string(n)) {
			t.Errorf("%s: got %v, want an error naming it", n, err)
		}
	}
	r := &routerv3.Router{}
	r.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 9999, protowire.VarintType), 1))
	if _, err := (Factory{}).Build(mustAny(t, r), httpfilter.BuildContext{}); err == nil || !strings.Contains(err.Error(), "does not know") {
		t.Errorf("unknown field: got %v, want it refused", err)
	}
	if _, err := (Factory{}).Build(mustAny(t, &hcmv3.Rds{}), httpfilter.BuildContext{}); err == nil || !strings.Contains(err.Error(), "Router") {
		t.Errorf("another type: got %v, want an error naming Router", err)
	}
}

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
