package wire

import "sync"

// BodyBufSize is the size of the pooled body buffers: the largest DATA
// payload a peer may send before its SETTINGS_MAX_FRAME_SIZE says
// otherwise (RFC 9113 §6.5.2).
const BodyBufSize = 16 << 10

// bodyBufs pools body buffers, shared by the server's request bodies and
// the client's request and response bodies (array pointers: a Put
// allocates nothing).
var bodyBufs = sync.Pool{New: func() any { return new([BodyBufSize]byte) }}

// GetBodyBuf returns an empty buffer for at least n bytes: a pooled one
// of BodyBufSize when n fits in it, else one of its own.
func GetBodyBuf(n int) []byte {
	if n > BodyBufSize {
		return make([]byte, 0, n)
	}
	return bodyBufs.Get().(*[BodyBufSize]byte)[:0]
}

// PutBodyBuf gives b back to the pool once nothing refers to it; a
// buffer of another size (one GetBodyBuf made for more, or one an append
// grew) is left to the collector.
func PutBodyBuf(b []byte) {
	if cap(b) == BodyBufSize {
		bodyBufs.Put((*[BodyBufSize]byte)(b[:BodyBufSize]))
	}
}
