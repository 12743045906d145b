package fielderr

import (
	"errors"
	"fmt"
	"testing"
)

func TestError(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{File: "f", Document: 2, Field: "spec", Problem: "p"}, "f: document 2: spec: p"},
		{Error{File: "f", Problem: "p"}, "f: p"},
		{Error{Document: 1, Problem: "p"}, "document 1: p"},
		{Error{Field: "x", Problem: "p"}, "x: p"},
		{Error{Problem: "p"}, "p"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
	}
}

func TestAll(t *testing.T) {
	a, b, c := &Error{Problem: "a"}, &Error{Problem: "b"}, &Error{Problem: "c"}
	joined := errors.Join(a, fmt.Errorf("wrapped: %w", b), errors.Join(c))
	got := All(joined)
	if len(got) != 3 || got[0] != a || got[1] != b || got[2] != c {
		t.Fatalf("All = %v", got)
	}
	if All(nil) != nil || len(All(errors.New("plain"))) != 0 {
		t.Fatal("All of nil or a plain error")
	}
}

// A List's problems carry its document; AddErr keeps the cause for
// errors.Is; no problem is a nil error.
func TestList(t *testing.T) {
	l := &List{File: "f.yaml", Document: 3}
	if l.Err() != nil || l.Len() != 0 {
		t.Fatal("an empty list is an error")
	}
	cause := errors.New("cause")
	l.Add("spec.a", "bad %d", 1)
	l.AddErr("spec.b", cause)
	if l.Len() != 2 {
		t.Fatalf("Len = %d, want 2", l.Len())
	}
	got := All(l.Err())
	if len(got) != 2 || got[0].Error() != "f.yaml: document 3: spec.a: bad 1" || got[1].Error() != "f.yaml: document 3: spec.b: cause" {
		t.Fatalf("errors = %v", got)
	}
	if !errors.Is(l.Err(), cause) || errors.Is(got[0], cause) {
		t.Error("AddErr's cause is not reachable with errors.Is, or Add's is")
	}
}
