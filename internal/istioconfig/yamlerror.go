package istioconfig

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
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

// UTF8 returns text saved as UTF-16 (as some Windows editors do; known by
// its byte order mark) as UTF-8, and other text as it is. The YAML
// decoder reads UTF-16 too, but the document splitter looks for "---" in
// bytes: it would hand all the documents to the decoder as one, which
// keeps the first and drops the rest.
func UTF8(data []byte) ([]byte, error) {
	var order binary.ByteOrder
	switch {
	case bytes.HasPrefix(data, []byte{0xff, 0xfe}):
		order = binary.LittleEndian
	case bytes.HasPrefix(data, []byte{0xfe, 0xff}):
		order = binary.BigEndian
	default:
		return data, nil
	}
	data = data[2:]
	if len(data)%2 != 0 {
		return nil, errors.New("UTF-16 text (by its byte order mark) with an odd number of bytes; save the file as UTF-8")
	}
	u := make([]uint16, len(data)/2)
	for i := range u {
		u[i] = order.Uint16(data[2*i:])
	}
	return []byte(string(utf16.Decode(u))), nil
}
