package buffer

import "google.golang.org/protobuf/reflect/protoreflect"

// The buffer filter's field audit: every field of Buffer and
// BufferPerRoute is honoured (read by Build and ParsePerRoute); one a
// newer API adds is refused by name until it is implemented.
var (
	bufferHonoured = map[protoreflect.Name]string{
		"max_request_bytes": "Build",
	}
	bufferPerRouteHonoured = map[protoreflect.Name]string{
		"disabled": "ParsePerRoute", "buffer": "ParsePerRoute",
	}
)
