package wire

import (
	"net/http"
	"strings"

	"golang.org/x/net/http2"
)

// WriteHeaderBlock writes an encoded header block for stream id as one
// HEADERS frame followed by as many CONTINUATION frames as it takes, each
// fragment at most maxFrame bytes (the peer's SETTINGS_MAX_FRAME_SIZE);
// END_HEADERS is on the last one, END_STREAM on the HEADERS if endStream.
func WriteHeaderBlock(fr *http2.Framer, id uint32, block []byte, maxFrame int, endStream bool) error {
	n := min(len(block), maxFrame)
	err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:n], EndStream: endStream, EndHeaders: n == len(block)})
	for block = block[n:]; err == nil && len(block) > 0; block = block[n:] {
		n = min(len(block), maxFrame)
		err = fr.WriteContinuation(id, n == len(block), block[:n])
	}
	return err
}

// maxLowered bounds LowerCache: names past it are lowered each time, so
// that a peer sending many distinct names cannot grow it.
const maxLowered = 1000

// LowerCache lowers header names for HPACK (HTTP/2 names are lower case),
// keeping the first maxLowered names it saw. Not safe for concurrent use:
// the connection's write lock guards it.
type LowerCache struct {
	m map[string]string
}

// Lower returns name in lower case.
func (c *LowerCache) Lower(name string) string {
	if l, ok := c.m[name]; ok {
		return l
	}
	l := strings.ToLower(name)
	if len(c.m) < maxLowered {
		if c.m == nil {
			c.m = map[string]string{}
		}
		c.m[name] = l
	}
	return l
}

// CanonCache gives the canonical form (http.CanonicalHeaderKey) of
// lower-case HTTP/2 field names, keeping the first maxLowered names it
// saw. Not safe for concurrent use: the connection's reader owns it.
type CanonCache struct {
	m map[string]string
}

// Canonical returns name's canonical form.
func (c *CanonCache) Canonical(name string) string {
	if k, ok := c.m[name]; ok {
		return k
	}
	k := http.CanonicalHeaderKey(name)
	if len(c.m) < maxLowered {
		if c.m == nil {
			c.m = map[string]string{}
		}
		c.m[name] = k
	}
	return k
}

// Reset forgets the names (a parked connection's memory).
func (c *CanonCache) Reset() { c.m = nil }
