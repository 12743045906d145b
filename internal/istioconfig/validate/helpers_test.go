package validate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/istioconfig"
)

// The validation is tested through istioconfig.ParseFile, as users meet
// it: a YAML document in, the field errors out.

// doc returns a one-document file of kind with the given metadata and spec
// (YAML flow or block text indented by two spaces).
func doc(kind, meta, spec string) string {
	return "apiVersion: networking.istio.io/v1\nkind: " + kind + "\nmetadata: " + meta + "\nspec:\n" + spec
}

func vs(spec string) string { return doc("VirtualService", "{name: vs}", spec) }
func dr(spec string) string { return doc("DestinationRule", "{name: dr}", spec) }
func se(spec string) string { return doc("ServiceEntry", "{name: se}", spec) }
func sc(spec string) string { return doc("Sidecar", "{name: sc}", spec) }
func we(spec string) string { return doc("WorkloadEntry", "{name: we}", spec) }

const route = "  - route:\n    - destination: {host: echo}\n"

// validationCase is one document and the exact field errors it must
// produce, each as "FIELD: problem substring"; none means it is valid.
type validationCase struct {
	name string
	yaml string
	errs []string
}

func runValidation(t *testing.T, tests []validationCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := istioconfig.ParseFile("t.yaml", []byte(tc.yaml))
			// Validation of a field Strait refuses still runs (it is
			// what users get once the field is honoured); the refusal
			// itself is TestRefusals' business.
			var fes []*istioconfig.FieldError
			refused := 0
			for _, fe := range istioconfig.FieldErrors(res.Err) {
				if errors.Is(fe, istioconfig.ErrNotSupported) {
					refused++
					continue
				}
				fes = append(fes, fe)
			}
			var got []string
			for _, fe := range fes {
				got = append(got, fe.Field+": "+fe.Problem)
			}
			ok := len(got) == len(tc.errs)
			for i := 0; ok && i < len(got); i++ {
				field, problem, _ := strings.Cut(tc.errs[i], ": ")
				ok = fes[i].Field == field && strings.Contains(fes[i].Problem, problem)
			}
			if !ok {
				t.Fatalf("errors:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.errs, "\n  "))
			}
			if len(tc.errs) == 0 && refused == 0 && len(res.Configs) != 1 {
				t.Fatalf("%d configs, want 1 (warnings %q)", len(res.Configs), res.Warnings)
			}
			if len(tc.errs) > 0 && len(res.Configs) != 0 {
				t.Fatalf("an invalid document was returned as a config")
			}
		})
	}
}
