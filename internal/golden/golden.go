// Package golden helps tests that compare generated output with golden
// files under testdata: Diff says how the output differs, line by line, so
// that a mismatch can be read in the test log instead of by eye. It
// imports nothing of Strait's.
package golden

import (
	"fmt"
	"strings"
)

// context is the number of unchanged lines shown around a change.
const context = 3

// maxCells bounds the line-matching table (lines removed × lines added
// once the common head and tail are cut off); past it the changed region
// is shown as a whole removal and addition.
const maxCells = 1 << 22

// Diff returns a line diff from want to got: changed regions with up to
// three unchanged lines around them, removed lines prefixed "-", added ones
// "+", and the 1-based line number in want of each region. It returns ""
// when want and got are equal.
func Diff(want, got []byte) string {
	if string(want) == string(got) {
		return ""
	}
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	// Cut the common head and tail: a golden change is usually small.
	head := 0
	for head < len(w) && head < len(g) && w[head] == g[head] {
		head++
	}
	tail := 0
	for tail < len(w)-head && tail < len(g)-head && w[len(w)-1-tail] == g[len(g)-1-tail] {
		tail++
	}
	ops := match(w[head:len(w)-tail], g[head:len(g)-tail])

	var b strings.Builder
	from := max(0, head-context)
	fmt.Fprintf(&b, "@@ want line %d @@\n", from+1)
	for _, l := range w[from:head] {
		b.WriteString("  " + l + "\n")
	}
	for _, op := range ops {
		b.WriteString(op + "\n")
	}
	for _, l := range w[len(w)-tail : min(len(w), len(w)-tail+context)] {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

// match returns the edit from w to g as lines prefixed "-", "+" or "  "
// (unchanged), from a longest common subsequence of lines.
func match(w, g []string) []string {
	if len(w)*len(g) > maxCells {
		var out []string
		for _, l := range w {
			out = append(out, "- "+l)
		}
		for _, l := range g {
			out = append(out, "+ "+l)
		}
		return out
	}
	// lcs[i][j] is the LCS length of w[i:] and g[j:].
	lcs := make([][]int32, len(w)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(g)+1)
	}
	for i := len(w) - 1; i >= 0; i-- {
		for j := len(g) - 1; j >= 0; j-- {
			if w[i] == g[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < len(w) || j < len(g) {
		switch {
		case i < len(w) && j < len(g) && w[i] == g[j]:
			out = append(out, "  "+w[i])
			i++
			j++
		case i < len(w) && (j == len(g) || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, "- "+w[i])
			i++
		default:
			out = append(out, "+ "+g[j])
			j++
		}
	}
	return out
}
