package httpfilter

import (
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// CheckFields is a filter config's field audit: it refuses the first field
// set in m that is not in honoured, naming it as prefix.field with the
// reason refused gives (just field when prefix is empty), and refuses
// fields m's Go type does not know (a newer API's, kept as unknown bytes
// when the config was unmarshalled), so that a filter never runs without
// something its config asks.
func CheckFields(prefix string, m protoreflect.Message, honoured, refused map[protoreflect.Name]string) error {
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		n := fd.Name()
		if _, ok := honoured[n]; ok {
			return true
		}
		path := string(n)
		if prefix != "" {
			path = prefix + "." + path
		}
		if why, ok := refused[n]; ok {
			err = fmt.Errorf("%s is not supported by strait-proxy: %s", path, why)
		} else {
			err = fmt.Errorf("%s is not supported by strait-proxy (remove it)", path)
		}
		return false
	})
	if err == nil && len(m.GetUnknown()) > 0 {
		what := "the config"
		if prefix != "" {
			what = prefix
		}
		err = fmt.Errorf("%s has fields strait-proxy does not know (a newer API's); remove them", what)
	}
	return err
}
