package fwdheaders

import "google.golang.org/protobuf/reflect/protoreflect"

// setCurrentClientCertDetailsFields are the fields of
// set_current_client_cert_details strait-proxy honours: all of today's;
// one added to the API later is refused until implemented.
var setCurrentClientCertDetailsFields = map[protoreflect.Name]bool{
	"subject": true, "cert": true, "chain": true, "dns": true, "uri": true,
}
