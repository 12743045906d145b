package wire

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// HeaderReader reads frames as http2.Framer.ReadFrame does with
// ReadMetaHeaders set (a header block, HEADERS and its CONTINUATIONs,
// comes back decoded as one *http2.MetaHeadersFrame, checked the same
// way), without the allocations x/net makes for each block (the frame,
// its emit closure and the variables it captures, the fields' slice): the
// MetaHeadersFrame and its fields' slice are the reader's, valid until
// the next read. The field names and values are strings of their own and
// may be kept.
//
// A HeaderReader is its connection's reader goroutine's.
type HeaderReader struct {
	fr  *http2.Framer // ReadMetaHeaders nil
	dec *hpack.Decoder
	max uint32 // the maximum header list size

	mh         http2.MetaHeadersFrame
	hremain    uint32 // what the block's fields may still take
	tremain    uint32 // what its trailer fields' names may
	sawRegular bool
	invalid    error // the first invalid field
}

// NewHeaderReader reads frames with fr (whose ReadMetaHeaders must be
// nil), decodes header blocks with dec (the connection's HPACK decoder,
// the peer's dynamic table), and refuses a block whose fields take more
// than maxList (RFC 9113's header list size; 0: 16 MiB) as x/net does:
// Truncated, or a connection error when it is far past. Until Release,
// dec is the reader's.
func NewHeaderReader(fr *http2.Framer, dec *hpack.Decoder, maxList uint32) *HeaderReader {
	if maxList == 0 {
		maxList = 16 << 20
	}
	r := &HeaderReader{fr: fr, dec: dec, max: maxList}
	dec.SetEmitFunc(r.emit)
	return r
}

// Release lets go of the decoder, which keeps no reference to r then (a
// parked connection keeps its decoder and drops its reader).
func (r *HeaderReader) Release() { r.dec.SetEmitFunc(dropField) }

func dropField(hpack.HeaderField) {}

// ReadFrame reads the next frame.
func (r *HeaderReader) ReadFrame() (http2.Frame, error) {
	f, err := r.fr.ReadFrame()
	if err != nil {
		return nil, err
	}
	if hf, ok := f.(*http2.HeadersFrame); ok {
		return r.readBlock(hf)
	}
	return f, nil
}

// readBlock decodes the header block hf starts (x/net's readMetaFrame).
func (r *HeaderReader) readBlock(hf *http2.HeadersFrame) (http2.Frame, error) {
	mh := &r.mh
	clear(mh.Fields)
	*mh = http2.MetaHeadersFrame{HeadersFrame: hf, Fields: mh.Fields[:0]}
	r.hremain, r.tremain = r.max, r.max
	r.sawRegular, r.invalid = false, nil
	dec := r.dec
	dec.SetEmitEnabled(true)
	dec.SetMaxStringLength(int(r.max))
	var frag interface {
		HeaderBlockFragment() []byte
		HeadersEnded() bool
	} = hf
	for {
		b := frag.HeaderBlockFragment()
		// Far past the limit (more than twice what is left), or a
		// CONTINUATION after an invalid field: the connection ends
		// rather than decode what would be dropped.
		if int64(len(b)) > 2*int64(r.hremain+r.tremain) || r.invalid != nil {
			return mh, http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if _, err := dec.Write(b); err != nil {
			return mh, http2.ConnectionError(http2.ErrCodeCompression)
		}
		if frag.HeadersEnded() {
			break
		}
		f, err := r.fr.ReadFrame()
		if err != nil {
			return nil, err
		}
		frag = f.(*http2.ContinuationFrame) // the framer checks the order
	}
	if err := dec.Close(); err != nil {
		return mh, http2.ConnectionError(http2.ErrCodeCompression)
	}
	if r.invalid != nil {
		return nil, http2.StreamError{StreamID: hf.StreamID, Code: http2.ErrCodeProtocol, Cause: r.invalid}
	}
	if err := checkPseudos(mh.PseudoFields()); err != nil {
		return nil, http2.StreamError{StreamID: hf.StreamID, Code: http2.ErrCodeProtocol, Cause: err}
	}
	return mh, nil
}

var errPseudoAfterRegular = errors.New("pseudo header field after regular")

// emit takes one decoded field (the decoder's emit function).
func (r *HeaderReader) emit(hf hpack.HeaderField) {
	if !httpguts.ValidHeaderFieldValue(hf.Value) {
		r.invalid = fmt.Errorf("invalid header field value for %q", hf.Name) // the value may be sensitive
	}
	if strings.HasPrefix(hf.Name, ":") {
		if r.sawRegular {
			r.invalid = errPseudoAfterRegular
		}
	} else {
		r.sawRegular = true
		if !validWireName(hf.Name) {
			r.invalid = fmt.Errorf("invalid header field name %q", hf.Name)
		}
	}
	if r.invalid != nil {
		r.dec.SetEmitEnabled(false)
		return
	}
	remain := &r.hremain
	size := hf.Size()
	if hf.Name == "trailer" {
		remain = &r.tremain
		n := strings.Count(hf.Value, ",") + 1
		size = uint32(len(hf.Value)-n+1) + uint32(n)*hpack.HeaderField{}.Size()
	}
	if size > *remain {
		r.dec.SetEmitEnabled(false)
		r.mh.Truncated = true
		r.hremain, r.tremain = 0, 0
		return
	}
	*remain -= size
	r.mh.Fields = append(r.mh.Fields, hf)
}

// validWireName: a field name on the wire is a token in lower case.
func validWireName(v string) bool {
	if v == "" {
		return false
	}
	for _, c := range v {
		if !httpguts.IsTokenRune(c) || 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

// checkPseudos refuses unknown, repeated and mixed (request and
// response) pseudo-header fields.
func checkPseudos(pf []hpack.HeaderField) error {
	var request, response bool
	for i, hf := range pf {
		switch hf.Name {
		case ":method", ":path", ":scheme", ":authority", ":protocol":
			request = true
		case ":status":
			response = true
		default:
			return fmt.Errorf("invalid pseudo-header %q", hf.Name)
		}
		for _, hf2 := range pf[:i] {
			if hf.Name == hf2.Name {
				return fmt.Errorf("duplicate pseudo-header %q", hf.Name)
			}
		}
	}
	if request && response {
		return errors.New("mix of request and response pseudo headers")
	}
	return nil
}
