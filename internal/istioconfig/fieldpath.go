package istioconfig

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// locateProtoError finds where in a spec protojson fails: it walks the JSON
// alongside the message descriptor and returns the path of the deepest
// field that does not decode on its own (e.g. "spec.http[0].route[1].weight")
// and protojson's complaint about it. protojson itself names only the field,
// not where it is, which is no help in a long VirtualService.
func locateProtoError(root string, raw []byte, md protoreflect.MessageDescriptor) (string, string, bool) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return root, "must be a mapping of fields", true
	}
	return locateInObject(root, obj, md)
}

func locateInObject(path string, obj map[string]json.RawMessage, md protoreflect.MessageDescriptor) (string, string, bool) {
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		value := obj[key]
		fieldPath := path + "." + key
		fd := md.Fields().ByJSONName(key)
		if fd == nil {
			fd = md.Fields().ByName(protoreflect.Name(key))
		}
		if fd == nil {
			return fieldPath, fmt.Sprintf("unknown field %q in %s", key, md.Name()), true
		}
		if fd.Kind() == protoreflect.MessageKind && !isWellKnown(fd.Message()) && !fd.IsMap() {
			if fd.IsList() {
				var items []json.RawMessage
				if err := json.Unmarshal(value, &items); err != nil {
					return fieldPath, "must be a list", true
				}
				for i, item := range items {
					itemPath := fmt.Sprintf("%s[%d]", fieldPath, i)
					if string(item) == "null" {
						// protojson rejects a null list element; json.Unmarshal
						// would take it for an empty object.
						return itemPath, "must not be null", true
					}
					if p, problem, ok := locateProtoError(itemPath, item, fd.Message()); ok {
						return p, problem, true
					}
				}
				continue
			}
			if string(value) == "null" {
				continue
			}
			if p, problem, ok := locateProtoError(fieldPath, value, fd.Message()); ok {
				return p, problem, true
			}
			continue
		}
		// A scalar, an enum, a map or a well-known type: decode the field
		// alone into an empty message of the parent's type.
		single, _ := json.Marshal(map[string]json.RawMessage{key: value})
		if err := protojson.Unmarshal(single, dynamicpb.NewMessage(md)); err != nil {
			problem := describeProtoError(err, key)
			if fd.Kind() == protoreflect.EnumKind {
				problem += " (one of " + enumNames(fd.Enum()) + ")"
			}
			return fieldPath, problem, true
		}
	}
	return "", "", false
}

// describeProtoError rewords protojson's message for one field.
func describeProtoError(err error, key string) string {
	msg := cleanProtoError(err)
	msg = strings.TrimSpace(strings.Replace(msg, "for "+key+":", "", 1))
	return msg
}

func isWellKnown(md protoreflect.MessageDescriptor) bool {
	return strings.HasPrefix(string(md.FullName()), "google.protobuf.")
}

func enumNames(ed protoreflect.EnumDescriptor) string {
	names := make([]string, 0, ed.Values().Len())
	for i := range ed.Values().Len() {
		names = append(names, string(ed.Values().Get(i).Name()))
	}
	return strings.Join(names, ", ")
}
