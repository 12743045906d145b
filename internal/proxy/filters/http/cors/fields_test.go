package cors

import (
	"testing"

	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/straitmesh/strait/internal/proxy/fieldtest"
)

// TestCorsFieldsClassified: Build reads every CorsPolicy field, and the
// filter-level Cors has none; a newer API's field fails here.
func TestCorsFieldsClassified(t *testing.T) {
	none := map[protoreflect.Name]string{}
	fieldtest.Classified(t, (&corsv3.CorsPolicy{}).ProtoReflect().Descriptor(), corsPolicyHonoured, none)
	fieldtest.Classified(t, (&corsv3.Cors{}).ProtoReflect().Descriptor(), none, none)
}
