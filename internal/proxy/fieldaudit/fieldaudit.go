// Package fieldaudit refuses the fields of an Envoy config message that
// strait-proxy does not implement, so that a control plane never believes
// it configured something strait ignores. Each builder lists the fields it
// reads; a field set outside that list, and a field of a newer Envoy API
// than this build's (kept as unknown bytes when the message was
// unmarshalled), is an error naming it.
package fieldaudit

import (
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Check refuses the first field set in m that is not in honoured, naming
// it as prefix.field (just field when prefix is empty) with the reason
// refused gives for it, and refuses unknown fields.
func Check(prefix string, m protoreflect.Message, honoured, refused map[protoreflect.Name]string) error {
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		n := fd.Name()
		if _, ok := honoured[n]; ok {
			return true
		}
		if why, ok := refused[n]; ok {
			err = fmt.Errorf("%s is not supported by strait-proxy: %s", join(prefix, n), why)
		} else {
			err = fmt.Errorf("%s is not supported by strait-proxy (a field it does not know; remove it)", join(prefix, n))
		}
		return false
	})
	if err != nil {
		return err
	}
	return unknown(prefix, m)
}

// Only refuses the first field set in m that is not in allowed, naming it
// as prefix.field, and refuses unknown fields.
func Only(prefix string, m protoreflect.Message, allowed map[protoreflect.Name]bool) error {
	var bad protoreflect.Name
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if !allowed[fd.Name()] {
			bad = fd.Name()
			return false
		}
		return true
	})
	if bad != "" {
		return fmt.Errorf("%s is not supported by strait-proxy", join(prefix, bad))
	}
	return unknown(prefix, m)
}

// unknown refuses fields m's Go type does not know.
func unknown(prefix string, m protoreflect.Message) error {
	if len(m.GetUnknown()) == 0 {
		return nil
	}
	what := prefix
	if what == "" {
		what = "the " + string(m.Descriptor().Name())
	}
	return fmt.Errorf("%s has fields strait-proxy does not know (a newer API's); remove them", what)
}

func join(prefix string, n protoreflect.Name) string {
	if prefix == "" {
		return string(n)
	}
	return prefix + "." + string(n)
}
