// Package tlsconf is strait-proxy's TLS transport socket
// (envoy.transport_sockets.tls): it turns an UpstreamTlsContext or a
// DownstreamTlsContext into crypto/tls handshakes whose certificates and
// trust bundles come inline, from files, or over SDS (secrets.go), and are
// read per handshake so that a rotated secret applies to new handshakes
// while established connections keep theirs.
package tlsconf

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// onlyFields refuses, by name, every field set in m that is not in
// allowed: a control plane asking for something this socket does not
// implement gets a NACK that names it instead of a silently weaker
// connection.
func onlyFields(m proto.Message, path string, allowed ...string) error {
	var bad []string
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if !slices.Contains(allowed, string(fd.Name())) {
			bad = append(bad, path+"."+string(fd.Name()))
		}
		return true
	})
	if len(bad) > 0 {
		return fmt.Errorf("%s is not supported by strait-proxy (remove it)", strings.Join(bad, ", "))
	}
	return nil
}
