package main

import "testing"

// TestApplyMutation: the mutant is the one gremlins makes from the
// tree: a binary operator's operands stay bound as they were.
func TestApplyMutation(t *testing.T) {
	const head = "package p\n\nfunc f(a, b, c bool, x, y int) bool {\n"
	for _, c := range []struct {
		body, typ string
		col       int
		want      string
	}{
		{"\treturn a && b && c\n", "INVERT_LOGICAL", 11, "\treturn ((a) || (b)) && c\n"},
		{"\treturn a && b && c\n", "INVERT_LOGICAL", 16, "\treturn ((a && b) || (c))\n"},
		{"\treturn a || !b\n", "INVERT_LOGICAL", 11, "\treturn ((a) && (!b))\n"},
		{"\treturn x+1 < y\n", "CONDITIONALS_BOUNDARY", 13, "\treturn ((x+1) <= (y))\n"},
		{"\tx++\n\treturn true\n", "INCREMENT_DECREMENT", 3, "\tx--\n\treturn true\n"},
		{"\treturn -x > 0\n", "INVERT_NEGATIVES", 9, "\treturn +x > 0\n"},
	} {
		src := head + c.body + "}\n"
		out, _, _, err := applyMutation([]byte(src), mutation{Type: c.typ, Line: 4, Column: c.col})
		if err != nil {
			t.Errorf("%s at %d in %q: %v", c.typ, c.col, c.body, err)
			continue
		}
		if got, want := string(out), head+c.want+"}\n"; got != want {
			t.Errorf("%s at %d in %q:\n got %q\nwant %q", c.typ, c.col, c.body, got, want)
		}
	}
	if _, _, _, err := applyMutation([]byte(head+"\treturn a\n}\n"), mutation{Type: "INVERT_LOGICAL", Line: 4, Column: 9}); err == nil {
		t.Error("a mutation with no operator at its place: no error")
	}
}
