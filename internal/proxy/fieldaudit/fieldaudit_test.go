package fieldaudit

import (
	"testing"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// withUnknown returns a FractionalPercent carrying a field its Go type
// does not know (a newer API's), as unmarshalling leaves one.
func withUnknown() *typev3.FractionalPercent {
	m := &typev3.FractionalPercent{Numerator: 1}
	m.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1))
	return m
}

func TestCheck(t *testing.T) {
	honoured := map[protoreflect.Name]string{"numerator": "x"}
	refused := map[protoreflect.Name]string{"denominator": "use HUNDRED"}
	for _, tc := range []struct {
		name     string
		honoured map[protoreflect.Name]string
		prefix   string
		m        *typev3.FractionalPercent
		want     string // "" for no error
	}{
		{"honoured", honoured, "p", &typev3.FractionalPercent{Numerator: 1}, ""},
		{"unset fields are not looked at", nil, "p", &typev3.FractionalPercent{}, ""},
		{"refused, with its reason", honoured, "p", &typev3.FractionalPercent{Numerator: 1, Denominator: typev3.FractionalPercent_MILLION}, "p.denominator is not supported by strait-proxy: use HUNDRED"},
		{"in neither list, no prefix", nil, "", &typev3.FractionalPercent{Numerator: 1}, "numerator is not supported by strait-proxy (a field it does not know; remove it)"},
		{"unknown bytes", honoured, "p", withUnknown(), "p has fields strait-proxy does not know (a newer API's); remove them"},
		{"unknown bytes, no prefix", honoured, "", withUnknown(), "the FractionalPercent has fields strait-proxy does not know (a newer API's); remove them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.prefix, tc.m.ProtoReflect(), tc.honoured, refused)
			if got := errText(err); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestOnly(t *testing.T) {
	allowed := map[protoreflect.Name]bool{"numerator": true}
	for _, tc := range []struct {
		name string
		m    *typev3.FractionalPercent
		want string
	}{
		{"allowed", &typev3.FractionalPercent{Numerator: 1}, ""},
		{"outside the list", &typev3.FractionalPercent{Denominator: typev3.FractionalPercent_MILLION}, "a.b.denominator is not supported by strait-proxy"},
		{"unknown bytes", withUnknown(), "a.b has fields strait-proxy does not know (a newer API's); remove them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := errText(Only("a.b", tc.m.ProtoReflect(), allowed)); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
