package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the repository's top directory, two levels above this
// package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// inlineCommand is a command in a Markdown code span of the prose.
var inlineCommand = regexp.MustCompile("`((?:straitctl|make|helm|kubectl) [^`]+)`")

// shellCommands returns the commands of a Markdown file: those of its
// ```sh blocks, one per line (a line ending in a backslash continues on
// the next), and those in code spans of the prose, each split into
// words joined by NUL.
func shellCommands(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds []string
	add := func(line string) {
		if words := shellWords(t, line); len(words) > 0 {
			cmds = append(cmds, strings.Join(words, "\x00"))
		}
	}
	in := false
	pending := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
		case strings.HasPrefix(line, "```"):
			in = false
		case in:
			if cont, ok := strings.CutSuffix(line, "\\"); ok {
				pending += cont
				continue
			}
			add(pending + line)
			pending = ""
		default:
			for _, m := range inlineCommand.FindAllStringSubmatch(line, -1) {
				add(m[1])
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cmds
}

// shellWords splits a line as sh does for the cases the docs use: single
// and double quotes, backslash escapes, a "#" comment starting a word,
// and "> FILE" redirections (dropped).
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord, quote := false, rune(0)
	escaped := false
	for _, r := range line {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case quote != 0:
			if r == quote {
				quote = 0
			} else if r == '\\' && quote == '"' {
				escaped = true
			} else {
				cur.WriteRune(r)
			}
		case r == '\\':
			escaped, inWord = true, true
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '#' && !inWord:
			return dropRedirects(words)
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("unterminated quote in %q", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return dropRedirects(words)
}

func dropRedirects(words []string) []string {
	for i, w := range words {
		if w == ">" {
			return words[:i]
		}
	}
	return words
}

var makeTarget = regexp.MustCompile(`(?m)^([A-Za-z0-9_.-]+):`)

// TestDocsCommands: every straitctl, helm, kubectl -f and make command in
// README.md and docs/install.md runs as written, short of a cluster: each
// straitctl command's flags parse, and each install renders the chart
// (with --dry-run; -f files are created empty); helm and kubectl name
// files and charts that exist; make names a Makefile target.
func TestDocsCommands(t *testing.T) {
	root := repoRoot(t)
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range makeTarget.FindAllStringSubmatch(string(makefile), -1) {
		targets[m[1]] = true
	}
	work := t.TempDir()
	var straitctlSeen int
	for _, doc := range []string{"README.md", "docs/install.md"} {
		for _, joined := range shellCommands(t, filepath.Join(root, doc)) {
			words := strings.Split(joined, "\x00")
			line := strings.Join(words, " ")
			t.Run(doc+": "+line, func(t *testing.T) {
				switch words[0] {
				case "straitctl":
					straitctlSeen++
					checkStraitctlCommand(t, work, words[1:])
				case "helm", "kubectl":
					for i, w := range words {
						if strings.HasPrefix(w, "manifests/") || (i > 0 && words[i-1] == "-f" && !strings.HasPrefix(w, "my-") && !strings.HasSuffix(w, "strait.yaml")) {
							if _, err := os.Stat(filepath.Join(root, w)); err != nil {
								t.Errorf("%s: %v", line, err)
							}
						}
					}
				case "make":
					for _, w := range words[1:] {
						if !strings.Contains(w, "=") && !targets[w] {
							t.Errorf("%s: the Makefile has no target %s", line, w)
						}
					}
				}
			})
		}
	}
	if straitctlSeen < 5 {
		t.Errorf("found %d straitctl commands in the docs, want the install section's", straitctlSeen)
	}
}

// checkStraitctlCommand parses args as straitctl would and, for install,
// renders the chart.
func checkStraitctlCommand(t *testing.T, work string, args []string) {
	t.Helper()
	root := newRootCmd()
	cmd, rest, err := root.Find(args)
	if err != nil {
		t.Fatalf("straitctl %v: %v", args, err)
	}
	if cmd == root {
		t.Fatalf("straitctl %v: no such command", args)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("straitctl %v: %v", args, err)
	}
	if cmd.Name() != "install" {
		return
	}
	run := []string{}
	dry := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--dry-run" {
			dry = true
		}
		if (a == "-f" || a == "--values") && i+1 < len(args) {
			f := filepath.Join(work, filepath.Base(args[i+1]))
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			run = append(run, a, f)
			i++
			continue
		}
		run = append(run, a)
	}
	if !dry {
		run = append(run, "--dry-run")
	}
	out, err := runStraitctl(t, run...)
	if err != nil {
		t.Fatalf("straitctl %v: %v", run, err)
	}
	if !strings.Contains(out, "kind: Deployment") {
		t.Errorf("straitctl %v printed no Deployment", run)
	}
}
