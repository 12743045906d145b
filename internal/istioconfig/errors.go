package istioconfig

import (
	"errors"
	"fmt"
)

// FieldError is one problem with one document. Its message has the form
// "FILE: document N: FIELD: problem".
type FieldError struct {
	File     string
	Document int    // 1-based among non-empty documents; 0 for file-level problems
	Field    string // e.g. "spec.hosts[0]"; may be empty
	Problem  string
	// Err, when set, is the error Problem was made from (e.g.
	// ErrNotSupported), for errors.Is.
	Err error
}

// Unwrap returns the error the problem was made from, if any.
func (e *FieldError) Unwrap() error { return e.Err }

func (e *FieldError) Error() string {
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

// FieldErrors returns every *FieldError in err (which may be joined).
func FieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		var fe *FieldError
		if errors.As(e, &fe) && e == error(fe) { //nolint:errorlint // is e itself the FieldError (not one it wraps)?
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

// errorList collects field errors for one document.
type errorList struct {
	src  Source
	errs []error
}

func (l *errorList) add(field, format string, args ...any) {
	l.errs = append(l.errs, &FieldError{File: l.src.File, Document: l.src.Document, Field: field, Problem: fmt.Sprintf(format, args...)})
}

func (l *errorList) err() error { return errors.Join(l.errs...) }

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

// addErr records a problem that wraps err (so that errors.Is sees it).
func (l *errorList) addErr(field string, err error) {
	l.errs = append(l.errs, &FieldError{File: l.src.File, Document: l.src.Document, Field: field, Problem: err.Error(), Err: err})
}
