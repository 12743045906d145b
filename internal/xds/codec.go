package xds

import (
	"fmt"
	"math/bits"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// ServerOptions returns the gRPC server options the xDS server should be
// created with (grpc.NewServer(xds.ServerOptions()...)): only a protobuf
// codec, the same wire format as gRPC's default one, that marshals into
// buffers sized for the message.
//
// Why: gRPC's default codec marshals every message of more than 1 KiB into
// a buffer from mem.DefaultBufferPool, whose tiers are 256 B, 4 KiB,
// 16 KiB, 32 KiB and 1 MiB, and which zeroes a buffer's whole capacity on
// every Get. xDS responses are typically between 32 KiB and 1 MiB, so each
// one cost a 1 MiB buffer and a 1 MiB memclr: about half of the CPU of a
// push to 1000 proxies, and much of the RSS. The codec applies to every
// service registered on that grpc.Server; it handles any protobuf message,
// as gRPC's does.
//
// Each call returns options with a new codec and buffer pool.
func ServerOptions() []grpc.ServerOption {
	return serverOptions(newCodec())
}

func serverOptions(c *codec) []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(c)}
}

// codec is a protobuf encoding.CodecV2 named "proto", like gRPC's default
// codec, whose buffers come from a pool that does not zero them (a
// bufferPool, of power-of-two tiers). It is safe for concurrent use.
type codec struct {
	pool mem.BufferPool
}

func newCodec() *codec { return &codec{pool: &bufferPool{}} }

// Marshal returns v's wire bytes. Messages below gRPC's pooling threshold
// get a fresh slice; larger ones a pooled buffer that gRPC hands back to
// the pool (Buffer.Free) once the bytes are written.
func (c *codec) Marshal(v any) (mem.BufferSlice, error) {
	m := messageV2Of(v)
	if m == nil {
		return nil, fmt.Errorf("proto codec: marshal %T: not a proto.Message", v)
	}
	size := proto.Size(m)
	// UseCachedSize reuses the sizes that proto.Size just cached in m; it
	// is safe because m is not modified while gRPC sends it.
	opts := proto.MarshalOptions{UseCachedSize: true}
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("proto codec: marshal %T: %w", v, err)
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := c.pool.Get(size)
	// The buffer is not zeroed: MarshalAppend writes exactly size bytes,
	// which the length check below confirms (it also proves that
	// MarshalAppend did not have to grow the buffer).
	out, err := opts.MarshalAppend((*buf)[:0], m)
	if err != nil {
		c.pool.Put(buf)
		return nil, fmt.Errorf("proto codec: marshal %T: %w", v, err)
	}
	if len(out) != size {
		c.pool.Put(buf)
		return nil, fmt.Errorf("proto codec: marshal %T wrote %d bytes, proto.Size said %d (message modified during marshalling?)", v, len(out), size)
	}
	return mem.BufferSlice{mem.NewBuffer(buf, c.pool)}, nil
}

// Unmarshal parses data into v, as gRPC's codec does. proto.Unmarshal
// copies what it keeps, so the materialized buffer is freed on return.
func (c *codec) Unmarshal(data mem.BufferSlice, v any) error {
	m := messageV2Of(v)
	if m == nil {
		return fmt.Errorf("proto codec: unmarshal into %T: not a proto.Message", v)
	}
	// A multi-buffer message is copied into a pooled buffer: CopyTo
	// overwrites all of it, so it needs no zeroing either.
	buf := data.MaterializeToBuffer(c.pool)
	defer buf.Free()
	if err := proto.Unmarshal(buf.ReadOnlyData(), m); err != nil {
		return fmt.Errorf("proto codec: unmarshal %T: %w", v, err)
	}
	return nil
}

// Name is "proto": the codec replaces gRPC's for the content-subtype
// clients send by default.
func (c *codec) Name() string { return "proto" }

var _ encoding.CodecV2 = (*codec)(nil)

// messageV2Of returns v as a proto.Message, nil when it is none, accepting
// APIv1 messages like gRPC's codec.
func messageV2Of(v any) proto.Message {
	switch v := v.(type) {
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(v)
	case protoadapt.MessageV2:
		return v
	}
	return nil
}

// Buffer pool tiers: capacities 1<<minTierShift .. 1<<maxTierShift.
const (
	minTierShift = 8  // 256 B
	maxTierShift = 22 // 4 MiB
)

// bufferPool is a mem.BufferPool with a sync.Pool per power-of-two
// capacity from 256 B to 4 MiB. Unlike gRPC's default pool it does not
// zero buffers: Get returns a buffer whose bytes are whatever the previous
// user left, so callers must overwrite all of them. Buffers larger than
// the top tier are allocated at their exact size and not pooled. The zero
// value is ready to use and safe for concurrent use.
type bufferPool struct {
	tiers [maxTierShift - minTierShift + 1]sync.Pool // of *[]byte
}

// tierOf returns the index of the smallest tier holding size bytes, or -1
// when size is larger than the top tier.
func tierOf(size int) int {
	if size <= 1<<minTierShift {
		return 0
	}
	shift := bits.Len(uint(size - 1)) // smallest power of two >= size
	if shift > maxTierShift {
		return -1
	}
	return shift - minTierShift
}

// Get returns a buffer of length size, not zeroed.
func (p *bufferPool) Get(size int) *[]byte {
	t := tierOf(size)
	if t < 0 {
		b := make([]byte, size)
		return &b
	}
	if b, ok := p.tiers[t].Get().(*[]byte); ok {
		*b = (*b)[:size]
		return b
	}
	b := make([]byte, size, 1<<(t+minTierShift))
	return &b
}

// Put returns a buffer obtained from Get to the pool. Buffers whose
// capacity is not a tier's (larger than the top tier, or not from Get) are
// left to the garbage collector.
func (p *bufferPool) Put(b *[]byte) {
	c := cap(*b)
	t := tierOf(c)
	if t < 0 || c != 1<<(t+minTierShift) {
		return
	}
	p.tiers[t].Put(b)
}

var _ mem.BufferPool = (*bufferPool)(nil)
