package pgv

import (
	"reflect"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Validated and Compile expose the type checks to the tests.
func Validated(t reflect.Type) bool { return validated(t) }

func Compile(md protoreflect.MessageDescriptor, t reflect.Type) error {
	_, err := compileMessage(md, t)
	return err
}
