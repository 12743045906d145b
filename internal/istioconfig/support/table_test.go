package support

import (
	"bytes"
	"os"
	"testing"

	"github.com/straitmesh/strait/internal/istioconfig/schema"
)

// TestFieldSupportComplete fails when a field of the istio.io/api types
// (e.g. one added by a dependency upgrade) is neither honoured nor refused
// in fieldSupport, or when an entry names a field that does not exist.
func TestFieldSupportComplete(t *testing.T) {
	if len(fieldSupport) != len(schema.Kinds) {
		t.Errorf("fieldSupport has %d kinds, Kinds %d", len(fieldSupport), len(schema.Kinds))
	}
	for _, kind := range schema.Kinds {
		paths := fieldPaths(schema.NewSpec(kind).ProtoReflect().Descriptor())
		known := map[string]bool{}
		for _, p := range paths {
			known[p] = true
			if _, ok := fieldSupport[kind][p]; !ok {
				t.Errorf("%s field %q is in neither list: add it to fieldSupport in support.go as Honoured or Refused", kind, p)
			}
		}
		for p := range fieldSupport[kind] {
			if !known[p] {
				t.Errorf("fieldSupport[%s] names %q, which is not a field of the istio.io/api type", kind, p)
			}
		}
	}
}

// TestFieldsDocUpToDate fails when docs/istio-fields.md is not what the
// registry generates.
func TestFieldsDocUpToDate(t *testing.T) {
	got, err := os.ReadFile("../../../docs/istio-fields.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, FieldsMarkdown()) {
		t.Error("docs/istio-fields.md is stale: run go run ./hack/istiofields")
	}
	for _, want := range []string{"| `http.match.statPrefix` | refused |", "| `http.route.weight` | honoured |", "## VirtualService", "## Telemetry", "| `accessLogging.filter` | refused |", "| `metrics.overrides.disabled` | honoured |"} {
		if !bytes.Contains(got, []byte(want)) {
			t.Errorf("docs/istio-fields.md lacks %q", want)
		}
	}
}
