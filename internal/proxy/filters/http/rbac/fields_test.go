package rbac

import (
	"strings"
	"testing"

	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/fieldtest"
)

// TestRBACFieldsClassified: every RBAC config field is honoured or refused.
func TestRBACFieldsClassified(t *testing.T) {
	fieldtest.Classified(t, (&rbachttpv3.RBAC{}).ProtoReflect().Descriptor(), rbacHonoured, rbacRefused)
}

// TestRBACRefusedFields: each refused field, set, is an error naming it.
func TestRBACRefusedFields(t *testing.T) {
	fields := (&rbachttpv3.RBAC{}).ProtoReflect().Descriptor().Fields()
	for n := range rbacRefused {
		m := &rbachttpv3.RBAC{}
		fieldtest.SetSomething(m.ProtoReflect(), fields.ByName(n))
		a, err := anypb.New(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(a); err == nil || !strings.Contains(err.Error(), string(n)) {
			t.Errorf("%s: got %v, want an error naming it", n, err)
		}
	}
	a, err := anypb.New(&rbachttpv3.RBAC{RulesStatPrefix: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(a); err != nil {
		t.Errorf("honoured fields: %v", err)
	}
}
