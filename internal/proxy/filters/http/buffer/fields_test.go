package buffer

import (
	"testing"

	bufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/buffer/v3"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/straitmesh/strait/internal/proxy/fieldtest"
)

// TestBufferFieldsClassified: every field of Buffer and BufferPerRoute is
// honoured, so that a newer API's field is noticed here.
func TestBufferFieldsClassified(t *testing.T) {
	fieldtest.Classified(t, (&bufferv3.Buffer{}).ProtoReflect().Descriptor(), bufferHonoured, map[protoreflect.Name]string{})
	fieldtest.Classified(t, (&bufferv3.BufferPerRoute{}).ProtoReflect().Descriptor(), bufferPerRouteHonoured, map[protoreflect.Name]string{})
}
