package istioconfig

import (
	"errors"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"
)

// TestDecodeJSON: a message that is not a document's spec decodes with Go
// durations, and a problem names its field by the path from the root
// (no leading dot).
func TestDecodeJSON(t *testing.T) {
	var ok networking.ConnectionPoolSettings
	if err := DecodeJSON([]byte(`{"tcp": {"connectTimeout": "1500ms", "maxConnections": 3}}`), &ok); err != nil {
		t.Fatalf("valid: %v", err)
	}
	if got := ok.GetTcp().GetConnectTimeout().AsDuration(); got != 1500*time.Millisecond {
		t.Errorf("connectTimeout = %v, want 1.5s", got)
	}
	if got := ok.GetTcp().GetMaxConnections(); got != 3 {
		t.Errorf("maxConnections = %d, want 3", got)
	}

	for _, tc := range []struct {
		name, json, field, problem string
	}{
		{"bad duration", `{"tcp": {"connectTimeout": "soon"}}`, "tcp.connectTimeout", `"soon" is not a duration (write e.g. 250ms, 1.5s, 1m or 1h)`},
		{"unknown field", `{"tcp": {"bogus": 1}}`, "tcp.bogus", `unknown field "bogus" in TCPSettings`},
		{"wrong type", `{"tcp": {"maxConnections": "many"}}`, "tcp.maxConnections", `invalid value for int32 field maxConnections: "many"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m networking.ConnectionPoolSettings
			err := DecodeJSON([]byte(tc.json), &m)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T), want a *FieldError", err, err)
			}
			if fe.Field != tc.field || fe.Problem != tc.problem {
				t.Errorf("field %q problem %q, want %q %q", fe.Field, fe.Problem, tc.field, tc.problem)
			}
		})
	}
}
