package istioconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/istioconfig/fielderr"
)

// Istio reads a google.protobuf.Duration written in YAML as a Go duration
// ("1h", "1m", "250ms", "1500ms", "0.5s"), where protojson takes only
// seconds ("1.5s"). normalizeDurations rewrites, in a spec's JSON, every
// string value of a Duration field into protojson's form before the spec is
// decoded.

const durationName = "google.protobuf.Duration"

// normalizeDurations returns raw with every Duration-typed string value
// rewritten to protojson's form. A string that is not a Go duration is an
// error at its path. JSON that does not fit the descriptor is returned as
// is: protojson and locateProtoError report it.
func normalizeDurations(path string, raw json.RawMessage, md protoreflect.MessageDescriptor) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return raw, nil // not an object ("null" makes an empty one)
	}
	changed := false
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		fd := md.Fields().ByJSONName(key)
		if fd == nil {
			fd = md.Fields().ByName(protoreflect.Name(key))
		}
		if fd == nil || fd.Kind() != protoreflect.MessageKind {
			continue
		}
		fieldPath := path + "." + key
		var (
			out json.RawMessage
			err error
		)
		switch {
		case fd.IsMap():
			// No map of the istio.io/api types holds a Duration (maps
			// hold labels, ports and StringMatches).
			continue
		case fd.IsList():
			out, err = normalizeList(fieldPath, obj[key], fd.Message())
		default:
			out, err = normalizeValue(fieldPath, obj[key], fd.Message())
		}
		if err != nil {
			return nil, err
		}
		if string(out) != string(obj[key]) {
			obj[key] = out
			changed = true
		}
	}
	if !changed {
		return raw, nil
	}
	return json.Marshal(obj)
}

// normalizeValue rewrites one value of message type md.
func normalizeValue(path string, raw json.RawMessage, md protoreflect.MessageDescriptor) (json.RawMessage, error) {
	if md.FullName() == durationName {
		return normalizeDuration(path, raw)
	}
	if isWellKnown(md) {
		return raw, nil
	}
	return normalizeDurations(path, raw, md)
}

// normalizeList rewrites the elements of a list of messages.
func normalizeList(path string, raw json.RawMessage, md protoreflect.MessageDescriptor) (json.RawMessage, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return raw, nil
	}
	changed := false
	for i, item := range items {
		out, err := normalizeValue(fmt.Sprintf("%s[%d]", path, i), item, md)
		if err != nil {
			return nil, err
		}
		if string(out) != string(item) {
			items[i], changed = out, true
		}
	}
	if !changed {
		return raw, nil
	}
	return json.Marshal(items)
}

// normalizeDuration rewrites one Duration value written as a Go duration.
func normalizeDuration(path string, raw json.RawMessage) (json.RawMessage, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		var n json.Number
		if json.Unmarshal(raw, &n) == nil {
			return nil, &FieldError{Field: path, Problem: fmt.Sprintf("%s is not a duration: give its unit (e.g. %ss or %sms)", n, n, n)}
		}
		return raw, nil // not a string: protojson reports it
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return nil, &FieldError{Field: path, Problem: fmt.Sprintf("%q is not a duration (write e.g. 250ms, 1.5s, 1m or 1h)", s)}
	}
	return protojson.Marshal(durationpb.New(d))
}

// durationRule is Istio's limit on one Duration field.
type durationRule int

const (
	// atLeastMillisecond: at least 1 ms, in whole milliseconds (Istio's
	// agent.ValidateDuration, applied to nearly every Duration).
	atLeastMillisecond durationRule = iota
	// zeroOrMillisecond: 0 (disabled) or atLeastMillisecond
	// (ConnectionPoolSettings.TCPSettings.idle_timeout).
	zeroOrMillisecond
	// wholeSeconds: atLeastMillisecond, in whole seconds (CorsPolicy.max_age).
	wholeSeconds
	// anyNonNegative: no limit beyond not negative (a consistent-hash
	// cookie's ttl, where 0 means a session cookie; Istio does not validate it).
	anyNonNegative
)

// durationRules names the Duration fields whose rule is not
// atLeastMillisecond, by "MESSAGE.field" (full proto name of the message).
var durationRules = map[string]durationRule{
	"istio.networking.v1alpha3.ConnectionPoolSettings.TCPSettings.idle_timeout":      zeroOrMillisecond,
	"istio.networking.v1alpha3.CorsPolicy.max_age":                                   wholeSeconds,
	"istio.networking.v1alpha3.LoadBalancerSettings.ConsistentHashLB.HTTPCookie.ttl": anyNonNegative,
}

// validateDurations checks every set Duration of a spec against Istio's
// limits (pkg/config/validation: agent.ValidateDuration and the exceptions
// in durationRules).
func validateDurations(el *fielderr.List, path string, m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		f := path + "." + fd.JSONName()
		switch {
		case fd.IsMap():
			// No map of the istio.io/api types holds a Duration.
		case fd.IsList():
			if fd.Kind() != protoreflect.MessageKind {
				return true
			}
			for i := range v.List().Len() {
				validateDurationValue(el, fmt.Sprintf("%s[%d]", f, i), fd, v.List().Get(i).Message())
			}
		case fd.Kind() == protoreflect.MessageKind:
			validateDurationValue(el, f, fd, v.Message())
		}
		return true
	})
}

func validateDurationValue(el *fielderr.List, path string, fd protoreflect.FieldDescriptor, m protoreflect.Message) {
	if m.Descriptor().FullName() != durationName {
		if !isWellKnown(m.Descriptor()) {
			validateDurations(el, path, m)
		}
		return
	}
	secs := m.Get(m.Descriptor().Fields().ByName("seconds")).Int()
	nanos := m.Get(m.Descriptor().Fields().ByName("nanos")).Int()
	d := (&durationpb.Duration{Seconds: secs, Nanos: int32(nanos)}).AsDuration()
	rule := durationRules[string(fd.ContainingMessage().FullName())+"."+string(fd.Name())]
	if problem := checkDuration(d, rule); problem != "" {
		el.Add(path, "%s", problem)
	}
}

// checkDuration returns what is wrong with d under rule, or "".
func checkDuration(d time.Duration, rule durationRule) string {
	switch {
	case d < 0:
		return fmt.Sprintf("%v is negative; write a positive duration (e.g. 250ms)", d)
	case rule == anyNonNegative:
		return ""
	case d == 0 && rule == zeroOrMillisecond:
		return ""
	case d < time.Millisecond:
		return fmt.Sprintf("%v is shorter than 1ms, the least Istio accepts (write e.g. 1ms or 250ms)", d)
	case d%time.Millisecond != 0:
		return fmt.Sprintf("%v is finer than a millisecond; Istio takes whole milliseconds (e.g. %v)", d, d.Round(time.Millisecond))
	case rule == wholeSeconds && d%time.Second != 0:
		return fmt.Sprintf("%v is not whole seconds; this field is accurate to seconds only (e.g. %v)", d, max(d.Round(time.Second), time.Second))
	}
	return ""
}

// DecodeJSON decodes raw, the JSON of a message that is not a document's
// spec (the mesh config), into m as a spec is decoded: Duration values
// may be written as Go durations ("1500ms", "1h"), and a problem is a
// *FieldError naming the field by its path from the message's root
// ("defaultConfig.drainDuration"). Istio's limits on the values are the
// caller's to check.
func DecodeJSON(raw []byte, m proto.Message) error {
	md := m.ProtoReflect().Descriptor()
	norm, err := normalizeDurations("", raw, md)
	if err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return &FieldError{Field: strings.TrimPrefix(fe.Field, "."), Problem: fe.Problem}
		}
		return err
	}
	if err := protojson.Unmarshal(norm, m); err != nil {
		if path, problem, ok := locateProtoError("", norm, md); ok {
			return &FieldError{Field: strings.TrimPrefix(path, "."), Problem: problem}
		}
		return &FieldError{Problem: cleanProtoError(err)}
	}
	return nil
}
