package proxyheader

import "google.golang.org/protobuf/reflect/protoreflect"

// The socket's allow-lists (fieldaudit.Only in Unwrap); TestFields holds
// them to the protos.
var (
	upstreamFields = map[protoreflect.Name]bool{"config": true, "transport_socket": true}
	configFields   = map[protoreflect.Name]bool{"version": true}
)
