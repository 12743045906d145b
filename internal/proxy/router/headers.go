package router

import (
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
)

// HeaderEditor is the header representation a codec path lets HeaderOps
// edit. Names are lower case; implementations compare them without case.
type HeaderEditor interface {
	Has(name string) bool
	Del(name string)
	Add(name, value string)
}

// headerOp is one compiled HeaderValueOption.
type headerOp struct {
	name, value string
	action      corev3.HeaderValueOption_HeaderAppendAction
}

// HeaderOps are the header mutations of one level (route, weighted
// cluster): removals, then additions, in Envoy's order
// (HeaderParser::evaluateHeaders). The zero value does nothing. Immutable.
type HeaderOps struct {
	remove []string
	add    []headerOp
}

// Empty reports whether the ops change nothing.
func (h *HeaderOps) Empty() bool { return h == nil || len(h.remove) == 0 && len(h.add) == 0 }

// CompileHeaderOps compiles a level's *_headers_to_add and
// *_headers_to_remove; field names the config field for errors (e.g.
// "request_headers_to_add").
func CompileHeaderOps(field string, add []*corev3.HeaderValueOption, remove []string) (HeaderOps, error) {
	var ops HeaderOps
	removeField := strings.TrimSuffix(field, "add") + "remove"
	for i, name := range remove {
		if err := checkHeaderName(name); err != nil {
			return ops, fmt.Errorf("%s[%d]: %w", removeField, i, err)
		}
		ops.remove = append(ops.remove, strings.ToLower(name))
	}
	for i, o := range add {
		where := fmt.Sprintf("%s[%d]", field, i)
		if err := fieldaudit.Only(where, o.ProtoReflect(), headerValueOptionFields); err != nil {
			return ops, err
		}
		h := o.GetHeader()
		if len(h.GetRawValue()) > 0 {
			return ops, fmt.Errorf("%s.header.raw_value is not supported by strait-proxy (use value)", where)
		}
		if err := checkHeaderName(h.GetKey()); err != nil {
			return ops, fmt.Errorf("%s.header.key: %w", where, err)
		}
		if strings.Contains(h.GetValue(), "%") {
			return ops, fmt.Errorf("%s.header.value %q: substitution formatters (%%...%%) are not supported by strait-proxy", where, h.GetValue())
		}
		if h.GetValue() == "" && !o.GetKeepEmptyValue() {
			continue // Envoy drops an empty value unless keep_empty_value
		}
		act := o.GetAppendAction()
		if a := o.GetAppend(); a != nil {
			if act != corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD {
				return ops, fmt.Errorf("%s: append and append_action are both set (use append_action)", where)
			}
			if !a.GetValue() {
				act = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
			}
		}
		switch act {
		case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD, corev3.HeaderValueOption_ADD_IF_ABSENT,
			corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
		default:
			return ops, fmt.Errorf("%s.append_action %v is not supported by strait-proxy", where, act)
		}
		ops.add = append(ops.add, headerOp{name: strings.ToLower(h.GetKey()), value: h.GetValue(), action: act})
	}
	return ops, nil
}

// checkHeaderName refuses what Envoy refuses to mutate: pseudo-headers and
// Host.
func checkHeaderName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("header name is empty")
	case strings.HasPrefix(name, ":") || strings.EqualFold(name, "host"):
		return fmt.Errorf("header %q cannot be changed (pseudo-headers and host are not mutable; use host_rewrite_literal)", name)
	}
	return nil
}

// Apply edits e: removals first, then additions.
func (h *HeaderOps) Apply(e HeaderEditor) {
	if h == nil {
		return
	}
	for _, n := range h.remove {
		e.Del(n)
	}
	for _, o := range h.add {
		switch o.action {
		case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
			e.Add(o.name, o.value)
		case corev3.HeaderValueOption_ADD_IF_ABSENT:
			if !e.Has(o.name) {
				e.Add(o.name, o.value)
			}
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
			e.Del(o.name)
			e.Add(o.name, o.value)
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
			if e.Has(o.name) {
				e.Del(o.name)
				e.Add(o.name, o.value)
			}
		}
	}
}
