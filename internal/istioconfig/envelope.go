package istioconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/straitmesh/strait/internal/istioconfig/fielderr"
)

// document is the Kubernetes-style envelope.
type document struct {
	APIVersion string
	Kind       string
	Metadata   json.RawMessage
	Spec       json.RawMessage
	// Items is a List's items (nil for other documents).
	Items []json.RawMessage
	// keys are the document's top-level keys.
	keys []string
}

// envelopeKeys are the top-level keys of a config document.
var envelopeKeys = map[string]bool{"apiVersion": true, "kind": true, "metadata": true, "spec": true, "status": true}

// decodeEnvelope reads the top level of a document leniently (a document
// of another API group may have any fields: a ConfigMap's data, a List's
// items); the fields a config may have are checked once it is known to be
// one.
func decodeEnvelope(js []byte) (document, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil || top == nil {
		return document{}, errors.New("not a Kubernetes-style object: a document is a mapping with apiVersion, kind, metadata and spec")
	}
	var doc document
	for _, f := range []struct {
		key string
		out *string
	}{{"apiVersion", &doc.APIVersion}, {"kind", &doc.Kind}} {
		if raw, ok := top[f.key]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, f.out); err != nil {
				return document{}, &FieldError{Field: f.key, Problem: "must be a string"}
			}
		}
	}
	doc.Metadata, doc.Spec = top["metadata"], top["spec"]
	if raw, ok := top["items"]; ok {
		if json.Unmarshal(raw, &doc.Items) != nil || doc.Items == nil {
			doc.Items = []json.RawMessage{}
		}
	}
	for k := range top {
		doc.keys = append(doc.keys, k)
	}
	slices.Sort(doc.keys)
	return doc, nil
}

// unknownField returns the first top-level key a config may not have.
func (d document) unknownField() (string, bool) {
	for _, k := range d.keys {
		if !envelopeKeys[k] {
			return k, true
		}
	}
	return "", false
}

// istioKinds are the kinds of Istio's networking, security and telemetry API groups
// (istio.io/api), supported by Strait or not: a document of a kind not
// listed here is a mistake, not a kind to skip.
var istioKinds = map[string]map[string]bool{
	NetworkingGroup: {"DestinationRule": true, "EnvoyFilter": true, "Gateway": true, "ProxyConfig": true, "ServiceEntry": true,
		"Sidecar": true, "VirtualService": true, "WorkloadEntry": true, "WorkloadGroup": true},
	SecurityGroup:  {"AuthorizationPolicy": true, "PeerAuthentication": true, "RequestAuthentication": true},
	TelemetryGroup: {"Telemetry": true},
}

// otherIstioGroups are Istio's API groups whose kinds Strait does not read
// (skipped with a warning, not taken for misspellings).
var otherIstioGroups = map[string]bool{"extensions.istio.io": true, "install.istio.io": true}

// misspeltGroup reports whether group is most likely a misspelling of
// networking.istio.io, security.istio.io or telemetry.istio.io (at most two edits away, or
// another *.istio.io group that Istio does not have), and which one.
func misspeltGroup(group string) (string, bool) {
	if otherIstioGroups[group] {
		return "", false
	}
	best, dist := "", 3
	for _, g := range []string{NetworkingGroup, SecurityGroup, TelemetryGroup} {
		if d := editDistance(g, strings.ToLower(group)); d < dist {
			best, dist = g, d
		}
	}
	if best != "" {
		return best, true
	}
	if strings.HasSuffix(group, ".istio.io") {
		if strings.HasPrefix(group, "sec") {
			return SecurityGroup, true
		}
		if strings.HasPrefix(group, "tel") {
			return TelemetryGroup, true
		}
		return NetworkingGroup, true
	}
	return "", false
}

// suggestKind names the kind of group that kind most likely misspells
// (same letters but for case, or at most two edits away), as
// "; did you mean X?", or says which kinds there are.
func suggestKind(group, kind string) string {
	names := slices.Sorted(maps.Keys(istioKinds[group]))
	for _, n := range names {
		if strings.EqualFold(n, kind) || editDistance(strings.ToLower(n), strings.ToLower(kind)) <= 2 {
			return fmt.Sprintf("; did you mean %s?", n)
		}
	}
	return " (its kinds are " + strings.Join(names, ", ") + ")"
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return max(len(a), len(b))
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// istioItem finds the first item of a List in an Istio API group and
// describes it ("networking.istio.io/v1 ServiceEntry").
func istioItem(items []json.RawMessage) (int, string, bool) {
	for i, raw := range items {
		var item struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if json.Unmarshal(raw, &item) != nil {
			continue
		}
		group, _, _ := strings.Cut(item.APIVersion, "/")
		if _, ok := acceptedVersions[group]; ok {
			return i, item.APIVersion + " " + item.Kind, true
		}
	}
	return 0, "", false
}

// decodeMetadata reads the metadata fields a config uses into md, naming
// the field of each problem (metadata.labels.version, not "metadata");
// other fields (uid, resourceVersion, ...) are Kubernetes' and ignored.
// It reports whether md is usable.
func decodeMetadata(el *fielderr.List, raw json.RawMessage, md *metadata) bool {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		el.Add("metadata", "must be a mapping (name, namespace, labels, annotations)")
		return false
	}
	n := el.Len()
	for _, f := range []struct {
		key string
		out *string
	}{{"name", &md.Name}, {"namespace", &md.Namespace}} {
		if v, ok := top[f.key]; ok && string(v) != "null" && json.Unmarshal(v, f.out) != nil {
			el.Add("metadata."+f.key, "must be a string")
		}
	}
	for _, f := range []struct {
		key string
		out *map[string]string
	}{{"labels", &md.Labels}, {"annotations", &md.Annotations}} {
		v, ok := top[f.key]
		if !ok || string(v) == "null" {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(v, &m); err != nil {
			el.Add("metadata."+f.key, "must be a mapping of strings")
			continue
		}
		*f.out = make(map[string]string, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			var s string // null is "", as before
			if json.Unmarshal(m[k], &s) != nil {
				el.Add("metadata."+f.key+"."+k, "must be a string; quote it (%q)", string(m[k]))
				continue
			}
			(*f.out)[k] = s
		}
	}
	if v, ok := top["creationTimestamp"]; ok && string(v) != "null" {
		var s string
		t, err := time.Time{}, json.Unmarshal(v, &s)
		if err == nil {
			t, err = time.Parse(time.RFC3339, s)
		}
		if err != nil {
			el.Add("metadata.creationTimestamp", "%s is not an RFC 3339 time (e.g. 2024-05-01T12:00:00Z)", string(v))
		} else {
			md.CreationTimestamp = &t
		}
	}
	return el.Len() == n
}
