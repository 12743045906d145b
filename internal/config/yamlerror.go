package config

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// yamlLine finds the line numbers in go-yaml's messages: "yaml: line 4:
// found character ..." and, one per line, "  line 10: key "a" already set
// in map".
var yamlLine = regexp.MustCompile(`line (\d+):`)

// YAMLProblem rewrites a YAML decoding error of a document that starts on
// file line first (1 for a whole file) for a user: line numbers count from
// the top of the file, the "yaml: " prefixes go, the lines of a
// multi-problem error are joined, and the two mistakes people make most
// (tabs in indentation, a key written twice) say how to fix them.
func YAMLProblem(err error, doc []byte, first int) string {
	msg := strings.ReplaceAll(err.Error(), "yaml: unmarshal errors:\n", "")
	msg = strings.ReplaceAll(msg, "yaml: ", "")
	var parts []string
	for _, p := range strings.Split(msg, "\n") {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	msg = strings.Join(parts, "; ")
	tab := false
	msg = yamlLine.ReplaceAllStringFunc(msg, func(m string) string {
		n, convErr := strconv.Atoi(yamlLine.FindStringSubmatch(m)[1])
		if convErr != nil {
			return m
		}
		if l := docLine(doc, n); bytes.ContainsRune(l, '\t') {
			tab = true
		}
		return fmt.Sprintf("line %d:", n+first-1)
	})
	switch {
	case tab && strings.Contains(msg, "cannot start any token"):
		msg += " (indent with spaces: YAML does not allow tabs)"
	case strings.Contains(msg, "already set in map"):
		msg += " (a key may appear once in a mapping; remove or merge the repeated one)"
	}
	return msg
}

// docLine returns line n (1-based) of doc, or nil.
func docLine(doc []byte, n int) []byte {
	for i := 1; len(doc) > 0; i++ {
		line, rest, _ := bytes.Cut(doc, []byte("\n"))
		if i == n {
			return line
		}
		doc = rest
	}
	return nil
}
