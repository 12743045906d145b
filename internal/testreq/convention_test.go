package testreq

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSkipsGoThroughTestreq fails for every t.Skip, t.Skipf or t.SkipNow in
// the repository's Go files that is neither in this package nor under an
// `if testing.Short()`: an environment skip must go through Missing, so that
// STRAIT_REQUIRE_ALL turns it into a failure.
func TestSkipsGoThroughTestreq(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || filepath.Dir(path) == filepath.Join(root, "internal", "testreq") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		allowed := allowedLines(fset, f)
		for _, pos := range directSkips(f) {
			p := fset.Position(pos)
			if allowed[p.Line] {
				continue
			}
			rel, _ := filepath.Rel(root, p.Filename)
			bad = append(bad, rel+":"+itoa(p.Line))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("%s: skips directly; use testreq.Missing (or guard with testing.Short())", b)
	}
}

// TestDirectSkipsFound checks the detector itself on a small file.
func TestDirectSkipsFound(t *testing.T) {
	src := `package x
func A(t T) {
	if testing.Short() { t.Skip("slow") }
	if testing.Short() && x { t.Skipf("slow %d", 1) }
	if err != nil { t.Skip("no nginx") }
	t.SkipNow()
	b.Skipf("x")
	t.Run("y", func(t T) { t.Skip() })
}`
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(directSkips(f)); got != 4 {
		t.Fatalf("found %d direct skips, want 4 (the three outside testing.Short() and the one in t.Run)", got)
	}
}

// directSkips returns the positions of Skip calls not guarded by
// testing.Short().
func directSkips(f *ast.File) []token.Pos {
	var out []token.Pos
	var visit func(n ast.Node, short bool)
	visit = func(n ast.Node, short bool) {
		ast.Inspect(n, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.IfStmt:
				if n.Init != nil {
					visit(n.Init, short)
				}
				visit(n.Cond, short)
				visit(n.Body, short || mentionsShort(n.Cond))
				if n.Else != nil {
					visit(n.Else, short)
				}
				return false
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && !short {
					switch sel.Sel.Name {
					case "Skip", "Skipf", "SkipNow":
						out = append(out, n.Pos())
					}
				}
			}
			return true
		})
	}
	visit(f, false)
	return out
}

// allowedLines are the lines with a "testreq:ok" comment: a skip that is
// part of what a test tests, not a missing requirement.
func allowedLines(fset *token.FileSet, f *ast.File) map[int]bool {
	lines := map[int]bool{}
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			if strings.Contains(c.Text, "testreq:ok") {
				lines[fset.Position(c.Pos()).Line] = true
			}
		}
	}
	return lines
}

func mentionsShort(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Short" {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "testing" {
				found = true
			}
		}
		return !found
	})
	return found
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
