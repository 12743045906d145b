package peermeta

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// The HTTP headers of Istio's metadata exchange (istio/proxy
// peer_metadata filter, method istio_headers): the client's sidecar adds
// them to the request, the server's to the response, and each side
// removes the peer's before the application sees them.
const (
	HeaderMetadata   = "x-envoy-peer-metadata"
	HeaderMetadataID = "x-envoy-peer-metadata-id"
)

// MaxEncodedLen bounds an x-envoy-peer-metadata value we decode (base64
// text). Istio's own headers are well under 2 KiB; a longer one is
// refused as hostile rather than parsed.
const MaxEncodedLen = 16 << 10

// maxDepth bounds struct nesting in what a peer sends (a Struct holds
// Values that hold Structs): the fields we read are two levels deep.
const maxDepth = 16

// ErrTooLarge is returned for metadata over the size bounds.
var ErrTooLarge = errors.New("peer metadata too large")

var unmarshal = proto.UnmarshalOptions{RecursionLimit: maxDepth}

// EncodeHeader is the x-envoy-peer-metadata value for w: the deterministic
// protobuf serialization of w.Struct(), base64 with padding as Envoy's
// Base64::encode writes it.
func EncodeHeader(w Workload) (string, error) {
	b, err := marshalStruct(w.Struct())
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

func marshalStruct(s *structpb.Struct) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("serialize peer metadata: %w", err)
	}
	return b, nil
}

// DecodeHeader reads an x-envoy-peer-metadata value, padded or not (Envoy
// decodes it with decodeWithoutPadding, which takes both).
func DecodeHeader(v string) (Workload, error) {
	if len(v) > MaxEncodedLen {
		return Workload{}, fmt.Errorf("%s: %d bytes: %w", HeaderMetadata, len(v), ErrTooLarge)
	}
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(v, "="))
	if err != nil {
		return Workload{}, fmt.Errorf("%s: not base64: %w", HeaderMetadata, err)
	}
	var s structpb.Struct
	if err := unmarshal.Unmarshal(b, &s); err != nil {
		return Workload{}, fmt.Errorf("%s: not a google.protobuf.Struct: %w", HeaderMetadata, err)
	}
	return FromStruct(&s), nil
}

func marshalAny(a proto.Message) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("serialize peer exchange: %w", err)
	}
	return b, nil
}
