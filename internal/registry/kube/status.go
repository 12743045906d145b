package kube

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/straitmesh/strait/internal/istioconfig"
)

// The validation messages straitd writes on the status of an Istio object
// it refuses or rejects, in the shape of Istio's IstioStatus
// (istio.io/api meta/v1alpha1: status.validationMessages, each an
// analysis/v1alpha1 AnalysisMessageBase {level, type: {code, name}}, and
// status.observedGeneration), as istiod's in-cluster analysis writes them
// (pilot/pkg/status IstioGenerationProvider.SetValidationMessages).
//
// Istio's message carries its text only through the documentation page its
// code links to. Ours carries it in type.name: the Istio CRDs' schema has
// no other string field there, and the API server prunes unknown fields
// of status.validationMessages[] (it keeps only documentationUrl, level and
// type), so type.name is the one place `kubectl get -o yaml` shows why the
// object is not served.
const (
	// CodeNotSupported marks a field Strait refuses: the object is valid
	// Istio but sets something Strait does not implement yet.
	CodeNotSupported = "STR0001"
	// CodeInvalid marks an object Strait rejects as invalid.
	CodeInvalid = "STR0002"
	// CodeConflict marks an object served in part: the snapshot left
	// something of it out (a host another ServiceEntry defines first, a
	// delegate route outside its parent's match, ...). Level WARNING.
	CodeConflict = "STR0003"

	// codePrefix is shared by our codes (Istio's are IST....): messages
	// with other codes on a status are someone else's and are kept.
	codePrefix = "STR"
)

// validationMessage is one message straitd wants on an object's status.
type validationMessage struct {
	level       string // ERROR or WARNING
	code        string
	description string // the text of the log line: file, field path, problem and fix
}

// messagesFor turns the error of an object's conversion into its
// validation messages, one per field problem, at level ERROR (the object
// is not served), each with the text the log line has. nil for nil.
func messagesFor(err error) []validationMessage {
	if err == nil {
		return nil
	}
	var out []validationMessage
	for _, e := range flatten(err) {
		code := CodeInvalid
		if errors.Is(e, istioconfig.ErrNotSupported) {
			code = CodeNotSupported
		}
		out = append(out, validationMessage{level: "ERROR", code: code, description: e.Error()})
	}
	return out
}

// conflictMessage is the validation message of a problem the snapshot
// build found with a config it then served in part.
func conflictMessage(problem error) validationMessage {
	return validationMessage{level: "WARNING", code: CodeConflict, description: problem.Error()}
}

// flatten splits joined errors (istioconfig.ParseFile joins one error per field)
// into the leaves.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// unstructured renders m as a status.validationMessages[] entry.
func (m validationMessage) unstructured() map[string]any {
	return map[string]any{
		"level": m.level,
		"type":  map[string]any{"code": m.code, "name": m.description},
	}
}

// nextStatus decides what to write on an object's status: cur is its
// status now (nil for none), generation its metadata.generation, want the
// messages straitd has for that generation. It returns the new status and
// true when it differs from cur; false means leave the object alone (so an
// object that has been valid all along is never written, and a status that
// already says what we would write is not written again).
//
// The messages of other writers (codes not ours) and every other status
// field are kept. status.observedGeneration is set to generation whenever
// our messages change, or when they are there and describe an older
// generation, as istiod does with each status write.
func nextStatus(cur map[string]any, generation int64, want []validationMessage) (map[string]any, bool) {
	var others, ours []any
	if list, ok := cur["validationMessages"].([]any); ok {
		for _, v := range list {
			if isOurs(v) {
				ours = append(ours, v)
			} else {
				others = append(others, v)
			}
		}
	}
	wantList := make([]any, 0, len(want))
	for _, m := range want {
		wantList = append(wantList, m.unstructured())
	}
	same := sameMessages(ours, want)
	if same && (len(want) == 0 || observedGeneration(cur) == generation) {
		return nil, false
	}
	next := make(map[string]any, len(cur)+2)
	for k, v := range cur {
		next[k] = v
	}
	if msgs := append(others, wantList...); len(msgs) > 0 {
		next["validationMessages"] = msgs
	} else {
		delete(next, "validationMessages")
	}
	next["observedGeneration"] = generation
	return next, true
}

// isOurs reports a validation message with one of our codes.
func isOurs(v any) bool {
	m, _ := v.(map[string]any)
	t, _ := m["type"].(map[string]any)
	code, _ := t["code"].(string)
	return strings.HasPrefix(code, codePrefix)
}

// sameMessages compares the messages on a status with the ones wanted, in
// order (messagesFor's order is the order of the fields in the object).
func sameMessages(have []any, want []validationMessage) bool {
	return slices.EqualFunc(have, want, func(h any, w validationMessage) bool {
		m, _ := h.(map[string]any)
		t, _ := m["type"].(map[string]any)
		return m["level"] == w.level && t["code"] == w.code && t["name"] == w.description && len(t) == 2 && len(m) == 2
	})
}

// observedGeneration reads status.observedGeneration, which Istio's CRDs
// declare int-or-string; -1 when absent or unreadable.
func observedGeneration(status map[string]any) int64 {
	switch v := status["observedGeneration"].(type) {
	case int64:
		return v
	case float64:
		return int64(v)
	case string:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return -1
}
