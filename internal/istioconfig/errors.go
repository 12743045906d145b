package istioconfig

import (
	"errors"

	"github.com/straitmesh/strait/internal/istioconfig/fielderr"
)

// FieldError is one problem with one document (fielderr.Error). Its
// message has the form "FILE: document N: FIELD: problem".
type FieldError = fielderr.Error

// FieldErrors returns every *FieldError in err (which may be joined).
func FieldErrors(err error) []*FieldError { return fielderr.All(err) }

// ErrNotSupported is wrapped by the error of a field Strait refuses
// (fielderr.ErrNotSupported).
var ErrNotSupported = fielderr.ErrNotSupported

// newErrorList starts the error list of the document at src.
func newErrorList(src Source) *fielderr.List {
	return &fielderr.List{File: src.File, Document: src.Document}
}

// joinErrors flattens nested joins so that the message has one line per
// problem.
func joinErrors(errs []error) error {
	var flat []error
	for _, e := range errs {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			flat = append(flat, j.Unwrap()...)
			continue
		}
		flat = append(flat, e)
	}
	return errors.Join(flat...)
}
