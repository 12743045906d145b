package httpfilter

import (
	"strings"
	"testing"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

func TestCheckFields(t *testing.T) {
	honoured := map[protoreflect.Name]string{"numerator": "x"}
	refused := map[protoreflect.Name]string{"denominator": "use HUNDRED"}
	if err := CheckFields("p", (&typev3.FractionalPercent{Numerator: 1}).ProtoReflect(), honoured, refused); err != nil {
		t.Fatalf("honoured field: %v", err)
	}
	for _, tc := range []struct {
		honoured map[protoreflect.Name]string
		prefix   string
		m        *typev3.FractionalPercent
		want     string
	}{
		{honoured, "p", &typev3.FractionalPercent{Numerator: 1, Denominator: typev3.FractionalPercent_MILLION}, "p.denominator is not supported by strait-proxy: use HUNDRED"},
		{nil, "", &typev3.FractionalPercent{Numerator: 1}, "numerator is not supported by strait-proxy (remove it)"},
	} {
		err := CheckFields(tc.prefix, tc.m.ProtoReflect(), tc.honoured, refused)
		if err == nil || err.Error() != tc.want {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
	// A field the Go type does not know (a newer API's) is refused.
	m := &typev3.FractionalPercent{Numerator: 1}
	m.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1))
	if err := CheckFields("p", m.ProtoReflect(), honoured, refused); err == nil || !strings.Contains(err.Error(), "p has fields strait-proxy does not know") {
		t.Errorf("unknown field: got %v", err)
	}
}
