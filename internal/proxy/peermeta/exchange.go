package peermeta

import (
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// The TCP metadata exchange (istio/proxy network filter
// istio.metadata_exchange, metadata_exchange.cc and
// metadata_exchange_initial_header.h). On a connection whose TLS ALPN came
// out as istio-peer-exchange, each side first writes one frame:
//
//	magic     uint32, big-endian, 0x3D230467
//	data_size uint32, big-endian
//	data      a serialized google.protobuf.Any, type_url
//	          type.googleapis.com/google.protobuf.Struct, whose value is a
//	          Struct {"x-envoy-peer-metadata": Struct, "x-envoy-peer-metadata-id": string}
//
// and then the application's bytes follow unchanged. The client sends its
// frame as soon as the connection is up; the server answers with its own
// once it has read the client's.
const (
	// ALPN is the protocol both sides offer to say they speak the exchange.
	ALPN = "istio-peer-exchange"
	// Magic starts every exchange frame.
	Magic uint32 = 0x3D230467
	// HeaderLen is the fixed part of a frame (magic and data_size).
	HeaderLen = 8
	// MaxExchangeLen bounds data_size we accept from a peer; a frame that
	// claims more is refused before anything is buffered.
	MaxExchangeLen = 64 << 10
	structTypeURL  = "type.googleapis.com/google.protobuf.Struct"
)

var (
	// ErrShort says the buffer does not hold a whole frame yet.
	ErrShort = errors.New("peer exchange frame incomplete")
	// ErrNoExchange says the bytes do not start with the magic: the peer
	// does not speak the exchange (Istio counts header_not_found and
	// passes the bytes on).
	ErrNoExchange = errors.New("no peer exchange header")
)

// AppendExchange appends the exchange frame for the local workload w and
// its node id to dst.
func AppendExchange(dst []byte, id string, w Workload) ([]byte, error) {
	fields := map[string]*structpb.Value{HeaderMetadata: structpb.NewStructValue(w.Struct())}
	if id != "" {
		fields[HeaderMetadataID] = structpb.NewStringValue(id)
	}
	value, err := marshalStruct(&structpb.Struct{Fields: fields})
	if err != nil {
		return dst, err
	}
	anyBytes, err := marshalAny(&anypb.Any{TypeUrl: structTypeURL, Value: value})
	if err != nil {
		return dst, err
	}
	dst = binary.BigEndian.AppendUint32(dst, Magic)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(anyBytes)))
	return append(dst, anyBytes...), nil
}

// UnknownFrame is the frame of a proxy that knows nothing of itself (no
// node id, no metadata): what it sends when it was given no node.
func UnknownFrame() []byte {
	f, err := AppendExchange(nil, "", Workload{})
	if err != nil {
		panic(err) // an empty Struct always serializes
	}
	return f
}

// ParseExchange reads one exchange frame from the start of b. It returns
// the peer's id and workload and the number of bytes the frame took; the
// bytes after it are the application's. ErrShort asks for more bytes,
// ErrNoExchange says b does not start with a frame.
func ParseExchange(b []byte) (id string, w Workload, n int, err error) {
	if len(b) < 4 {
		if len(b) > 0 && !magicPrefix(b) {
			return "", Workload{}, 0, ErrNoExchange
		}
		return "", Workload{}, 0, ErrShort
	}
	if binary.BigEndian.Uint32(b) != Magic {
		return "", Workload{}, 0, ErrNoExchange
	}
	if len(b) < HeaderLen {
		return "", Workload{}, 0, ErrShort
	}
	size := binary.BigEndian.Uint32(b[4:])
	if size > MaxExchangeLen {
		return "", Workload{}, 0, fmt.Errorf("peer exchange: data_size %d over %d: %w", size, MaxExchangeLen, ErrTooLarge)
	}
	n = HeaderLen + int(size)
	if len(b) < n {
		return "", Workload{}, 0, ErrShort
	}
	var a anypb.Any
	if err := unmarshal.Unmarshal(b[HeaderLen:n], &a); err != nil {
		return "", Workload{}, 0, fmt.Errorf("peer exchange: not a google.protobuf.Any: %w", err)
	}
	if a.TypeUrl != structTypeURL {
		return "", Workload{}, 0, fmt.Errorf("peer exchange: type_url %q, want %q", a.TypeUrl, structTypeURL)
	}
	var s structpb.Struct
	if err := unmarshal.Unmarshal(a.Value, &s); err != nil {
		return "", Workload{}, 0, fmt.Errorf("peer exchange: not a google.protobuf.Struct: %w", err)
	}
	f := s.GetFields()
	return f[HeaderMetadataID].GetStringValue(), FromStruct(f[HeaderMetadata].GetStructValue()), n, nil
}

func magicPrefix(b []byte) bool {
	var m [4]byte
	binary.BigEndian.PutUint32(m[:], Magic)
	for i := range b {
		if b[i] != m[i] {
			return false
		}
	}
	return true
}
