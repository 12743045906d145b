// Package fielderr is the error a config document's field gets: where it
// is (file, document, field path) and what is wrong, and the List a
// document's checks add their problems to. The loader (package
// istioconfig), the validation (package validate) and the field support
// table (package support) all report through it.
package fielderr

import (
	"errors"
	"fmt"
)

// NotSupported is the problem of a field, or a value, Strait refuses.
const NotSupported = "not supported by Strait yet"

// ErrNotSupported is wrapped by the *Error of a field Strait refuses, so
// that a caller can tell a refused document from an invalid one
// (errors.Is(err, ErrNotSupported)).
var ErrNotSupported = errNotSupported{}

type errNotSupported struct{}

func (errNotSupported) Error() string { return NotSupported }

// Error is one problem with one document. Its message has the form
// "FILE: document N: FIELD: problem".
type Error struct {
	File     string
	Document int    // 1-based among non-empty documents; 0 for file-level problems
	Field    string // e.g. "spec.hosts[0]"; may be empty
	Problem  string
	// Err, when set, is the error Problem was made from (e.g.
	// ErrNotSupported), for errors.Is.
	Err error
}

// Unwrap returns the error the problem was made from, if any.
func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	var s string
	if e.File != "" {
		s = e.File + ": "
	}
	if e.Document > 0 {
		s += fmt.Sprintf("document %d: ", e.Document)
	}
	if e.Field != "" {
		s += e.Field + ": "
	}
	return s + e.Problem
}

// All returns every *Error in err (which may be joined).
func All(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		var fe *Error
		if errors.As(e, &fe) && e == error(fe) { //nolint:errorlint // is e itself the Error (not one it wraps)?
			out = append(out, fe)
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		if errors.As(e, &fe) {
			out = append(out, fe)
		}
	}
	walk(err)
	return out
}

// List collects the field errors of one document (File, Document). Not
// safe for concurrent use: one document is checked by one goroutine.
type List struct {
	File     string
	Document int
	errs     []error
}

// Add records a problem with field, the message formatted as fmt.Sprintf.
func (l *List) Add(field, format string, args ...any) {
	l.errs = append(l.errs, &Error{File: l.File, Document: l.Document, Field: field, Problem: fmt.Sprintf(format, args...)})
}

// AddErr records a problem that wraps err (so that errors.Is sees it).
func (l *List) AddErr(field string, err error) {
	l.errs = append(l.errs, &Error{File: l.File, Document: l.Document, Field: field, Problem: err.Error(), Err: err})
}

// Len is the number of problems recorded.
func (l *List) Len() int { return len(l.errs) }

// Err joins the problems; nil when there are none.
func (l *List) Err() error { return errors.Join(l.errs...) }
