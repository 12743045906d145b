// Command mutoverlay runs the mutants of a gremlins dry run one at a time
// through `go test -overlay`, so the source tree is never modified and no
// module copy is made: each mutant costs one build of the package's tests
// and one run of them. It prints one JSON line per mutant:
//
//	{"key":"match.go:318:10 CONDITIONALS_NEGATION","gremlins_status":"RUNNABLE",
//	 "status":"KILLED","from":"==","to":"!=","secs":6.1}
//
// status is KILLED (a test failed), LIVED (every test passed), NOT VIABLE
// (the mutant does not compile) or TIMED OUT. Unlike gremlins it also runs
// the mutants its coverage run marked NOT COVERED, since gremlins' coverage
// misses the operators of a tagless switch's cases.
//
// Usage, from the repository root:
//
//	bin/tools/gremlins unleash --dry-run --silent --invert-logical --invert-loopctrl \
//	    -E '/' -o /tmp/dry.json ./internal/proxy/route
//	go run ./hack/mutoverlay -in /tmp/dry.json -pkg internal/proxy/route > /tmp/route.jsonl
//
// -only FILE runs just the keys ("file:line:col TYPE", one a line) it lists:
// rerun the survivors after adding tests.
//
// The mutants build in a Go build cache of their own under the command's
// temporary directory, removed when it exits (or is interrupted): each
// mutant's build outputs are new, and in the shared cache, which Go trims
// only of entries unused for five days, they add up to tens of gigabytes
// (hack/mutate.sh does the same). -gocache DIR builds in DIR instead, and
// keeps it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mutoverlay:", err)
		os.Exit(1)
	}
}

// dryRun is the part of gremlins' JSON report this command reads.
type dryRun struct {
	Files []struct {
		FileName  string     `json:"file_name"`
		Mutations []mutation `json:"mutations"`
	} `json:"files"`
}

type mutation struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
}

type job struct {
	file string
	m    mutation
}

func (j job) key() string {
	return fmt.Sprintf("%s:%d:%d %s", j.file, j.m.Line, j.m.Column, j.m.Type)
}

type result struct {
	Key     string  `json:"key"`
	Gremlin string  `json:"gremlins_status"`
	Status  string  `json:"status"`
	From    string  `json:"from,omitempty"`
	To      string  `json:"to,omitempty"`
	Secs    float64 `json:"secs"`
}

type options struct {
	root, pkg, run string
	timeout        time.Duration
	tmp            string
	gocache        string // the mutants' GOCACHE
}

func run() error {
	in := flag.String("in", "", "gremlins dry-run JSON report (required)")
	pkg := flag.String("pkg", "", "package directory relative to -root (required)")
	root := flag.String("root", ".", "module root")
	only := flag.String("only", "", "file of keys (file:line:col TYPE) to run; empty: every mutant")
	workers := flag.Int("workers", 1, "mutants tested in parallel")
	timeout := flag.Duration("timeout", 3*time.Minute, "test time allowed per mutant (go test -timeout; the build may take 2 minutes more)")
	runRE := flag.String("run", "", "go test -run pattern (empty: every test)")
	gocache := flag.String("gocache", "", "Go build cache for the mutants' builds, kept (empty: a fresh one, removed at exit)")
	flag.Parse()
	if *in == "" || *pkg == "" {
		return errors.New("-in and -pkg are required (see the package comment)")
	}
	if *workers < 1 {
		return fmt.Errorf("-workers %d: want 1 or more", *workers)
	}
	raw, err := os.ReadFile(*in)
	if err != nil {
		return fmt.Errorf("read -in: %w", err)
	}
	var report dryRun
	if err := json.Unmarshal(raw, &report); err != nil {
		return fmt.Errorf("parse -in %s: %w", *in, err)
	}
	want, err := readKeys(*only)
	if err != nil {
		return err
	}
	absRoot, err := filepath.Abs(*root)
	if err != nil {
		return fmt.Errorf("-root: %w", err)
	}
	tmp, err := os.MkdirTemp("", "mutoverlay")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// An interrupt stops the run (the mutants in flight are killed) so that
	// the deferred RemoveAll takes the build cache with it.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := options{root: absRoot, pkg: filepath.Clean(*pkg), run: *runRE, timeout: *timeout, tmp: tmp,
		gocache: filepath.Join(tmp, "gocache")}
	if *gocache != "" {
		opts.gocache = *gocache
	}

	jobs := make(chan job)
	var (
		mu     sync.Mutex // guards enc and counts
		enc    = json.NewEncoder(os.Stdout)
		counts = map[string]int{}
		wg     sync.WaitGroup
	)
	for w := range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if ctx.Err() != nil {
					continue // interrupted: drain the queue
				}
				res := opts.test(ctx, w, j)
				if ctx.Err() != nil {
					continue // killed by the interrupt, not by a test
				}
				mu.Lock()
				_ = enc.Encode(res)
				counts[res.Status]++
				mu.Unlock()
			}
		}()
	}
	for _, f := range report.Files {
		for _, m := range f.Mutations {
			j := job{file: f.FileName, m: m}
			if want != nil && !want[j.key()] {
				continue
			}
			jobs <- j
		}
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	// The score leaves out mutants that do not compile or time out.
	killed, lived := counts["KILLED"], counts["LIVED"]
	if killed+lived > 0 {
		fmt.Fprintf(os.Stderr, "%s: killed %d lived %d not viable %d timed out %d: score %.1f%%\n",
			opts.pkg, killed, lived, counts["NOT VIABLE"], counts["TIMED OUT"], 100*float64(killed)/float64(killed+lived))
	}
	return nil
}

// readKeys reads the -only file: "file:line:col TYPE" a line, anything
// after the type ignored. A nil map means every mutant.
func readKeys(path string) (map[string]bool, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read -only: %w", err)
	}
	defer f.Close()
	want := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) >= 2 && !strings.HasPrefix(fs[0], "#") {
			want[fs[0]+" "+fs[1]] = true
		}
	}
	return want, sc.Err()
}

// test applies one mutant through an overlay file of worker w and runs the
// package's tests against it; ctx's end (an interrupt) kills them.
func (o options) test(ctx context.Context, w int, j job) result {
	res := result{Key: j.key(), Gremlin: j.m.Status}
	path := filepath.Join(o.root, o.pkg, j.file)
	src, err := os.ReadFile(path)
	if err != nil {
		res.Status = "ERROR " + err.Error()
		return res
	}
	out, from, to, err := applyMutation(src, j.m)
	if err != nil {
		res.Status = "ERROR " + err.Error()
		return res
	}
	res.From, res.To = from, to
	mutant := filepath.Join(o.tmp, fmt.Sprintf("w%d_%s", w, filepath.Base(j.file)))
	overlay := filepath.Join(o.tmp, fmt.Sprintf("w%d.json", w))
	ob, err := json.Marshal(map[string]any{"Replace": map[string]string{path: mutant}})
	if err == nil {
		err = os.WriteFile(mutant, out, 0o644)
	}
	if err == nil {
		err = os.WriteFile(overlay, ob, 0o644)
	}
	if err != nil {
		res.Status = "ERROR " + err.Error()
		return res
	}
	// The build comes on top of the tests' own -timeout.
	ctx, cancel := context.WithTimeout(ctx, o.timeout+2*time.Minute)
	defer cancel()
	// -count=1: a cached pass would hide the mutant; -failfast: one failing
	// test is enough; -vet=off, -ldflags=-w: a shorter build per mutant.
	// -timeout: the test binary ends itself when a mutant loops (killing
	// `go test` at the deadline would leave it running, orphaned).
	args := []string{"test", "-count=1", "-vet=off", "-ldflags=-w", "-failfast", "-overlay", overlay,
		"-timeout", o.timeout.String()}
	if o.run != "" {
		args = append(args, "-run", o.run)
	}
	args = append(args, "./"+filepath.ToSlash(o.pkg))
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = o.root
	cmd.Env = append(os.Environ(), "GOCACHE="+o.gocache)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	start := time.Now()
	err = cmd.Run()
	res.Secs = time.Since(start).Seconds()
	switch text := buf.String(); {
	case ctx.Err() != nil || strings.Contains(text, "panic: test timed out after"):
		res.Status = "TIMED OUT"
	case err == nil:
		res.Status = "LIVED"
	case strings.Contains(text, "[build failed]") || strings.Contains(text, "[setup failed]"):
		res.Status = "NOT VIABLE"
	default:
		res.Status = "KILLED"
	}
	return res
}

// replacement is the token gremlins' mutator typ puts in place of tok, or ""
// when typ does not apply to tok.
func replacement(typ string, tok token.Token) string {
	var m map[token.Token]string
	switch typ {
	case "ARITHMETIC_BASE":
		m = map[token.Token]string{token.ADD: "-", token.SUB: "+", token.MUL: "/", token.QUO: "*", token.REM: "*"}
	case "CONDITIONALS_BOUNDARY":
		m = map[token.Token]string{token.LSS: "<=", token.LEQ: "<", token.GTR: ">=", token.GEQ: ">"}
	case "CONDITIONALS_NEGATION":
		m = map[token.Token]string{token.EQL: "!=", token.NEQ: "==", token.LSS: ">=", token.LEQ: ">", token.GTR: "<=", token.GEQ: "<"}
	case "INCREMENT_DECREMENT":
		m = map[token.Token]string{token.INC: "--", token.DEC: "++"}
	case "INVERT_LOGICAL":
		m = map[token.Token]string{token.LAND: "||", token.LOR: "&&"}
	case "INVERT_LOOPCTRL":
		m = map[token.Token]string{token.BREAK: "continue", token.CONTINUE: "break"}
	case "INVERT_NEGATIVES":
		m = map[token.Token]string{token.SUB: "+"}
	}
	return m[tok]
}

// applyMutation replaces the token at the mutation's line and column
// (1-based, in bytes, as gremlins reports them).
func applyMutation(src []byte, m mutation) (out []byte, from, to string, err error) {
	fset := token.NewFileSet()
	f := fset.AddFile("mutant.go", -1, len(src))
	var s scanner.Scanner
	s.Init(f, src, nil, 0)
	for {
		pos, tok, _ := s.Scan()
		if tok == token.EOF {
			break
		}
		p := fset.Position(pos)
		if p.Line != m.Line || p.Column != m.Column {
			continue
		}
		to := replacement(m.Type, tok)
		if to == "" {
			continue // e.g. the automatic semicolon at the same place
		}
		from := tok.String()
		if x, y, ok := binaryOperands(src, p.Offset); ok {
			// Gremlins changes the operator of the expression's tree, so
			// its operands stay as they were bound: a && b && c with the
			// first && inverted is (a || b) && c, not a || b && c.
			var out []byte
			out = append(out, src[:x[0]]...)
			out = append(out, "(("...)
			out = append(out, src[x[0]:x[1]]...)
			out = append(out, ") "+to+" ("...)
			out = append(out, src[y[0]:y[1]]...)
			out = append(out, "))"...)
			out = append(out, src[y[1]:]...)
			return out, from, to, nil
		}
		out := make([]byte, 0, len(src)+len(to)-len(from))
		out = append(out, src[:p.Offset]...)
		out = append(out, to...)
		out = append(out, src[p.Offset+len(from):]...)
		return out, from, to, nil
	}
	return nil, "", "", fmt.Errorf("no token for %s at %d:%d", m.Type, m.Line, m.Column)
}

// binaryOperands finds the binary expression whose operator is at
// offset in src and returns its operands' byte ranges.
func binaryOperands(src []byte, offset int) (x, y [2]int, ok bool) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "mutant.go", src, parser.SkipObjectResolution)
	if err != nil {
		return x, y, false
	}
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	ast.Inspect(f, func(n ast.Node) bool {
		if ok {
			return false
		}
		if b, isBin := n.(*ast.BinaryExpr); isBin && off(b.OpPos) == offset {
			x = [2]int{off(b.X.Pos()), off(b.X.End())}
			y = [2]int{off(b.Y.Pos()), off(b.Y.End())}
			ok = true
			return false
		}
		return true
	})
	return x, y, ok
}
