package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// block encodes fields (name, value pairs) with enc; indexed: with
// incremental indexing (the dynamic table), else without.
func block(enc *hpack.Encoder, buf *bytes.Buffer, fields ...string) []byte {
	buf.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return append([]byte(nil), buf.Bytes()...)
}

// outcome is what a reader made of one frame.
type outcome struct {
	Fields    []hpack.HeaderField
	Truncated bool
	Ended     bool
	Err       string
}

func describe(f http2.Frame, err error) outcome {
	var o outcome
	if err != nil {
		var se http2.StreamError
		var ce http2.ConnectionError
		switch {
		case errors.As(err, &se):
			o.Err = fmt.Sprintf("stream %d %v", se.StreamID, se.Code)
		case errors.As(err, &ce):
			o.Err = fmt.Sprintf("connection %v", http2.ErrCode(ce))
		default:
			o.Err = err.Error()
		}
		return o
	}
	if mh, ok := f.(*http2.MetaHeadersFrame); ok {
		o.Fields = append([]hpack.HeaderField(nil), mh.Fields...)
		o.Truncated = mh.Truncated
		o.Ended = mh.StreamEnded()
		return o
	}
	o.Err = fmt.Sprintf("frame %T", f)
	return o
}

// TestHeaderReaderAsXNet: the same frames give the same fields, flags and
// errors through HeaderReader as through x/net's Framer with
// ReadMetaHeaders, blocks after blocks on one HPACK state (the dynamic
// table carried between them, a stream error not ending the connection).
func TestHeaderReaderAsXNet(t *testing.T) {
	var wire bytes.Buffer
	wfr := http2.NewFramer(&wire, nil)
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	id := uint32(1)
	headers := func(b []byte, end bool) {
		_ = wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b, EndHeaders: true, EndStream: end})
		id += 2
	}
	req := []string{":method", "GET", ":scheme", "http", ":authority", "example.com", ":path", "/a"}
	headers(block(enc, &hbuf, append(req, "user-agent", "test", "x-a", "1")...), true)
	headers(block(enc, &hbuf, append(req, "user-agent", "test", "x-a", "1")...), false) // from the dynamic table
	headers(block(enc, &hbuf, append(req, "X-Upper", "1")...), true)
	headers(block(enc, &hbuf, append(req, "x-bad", "a\x00b")...), true)
	headers(block(enc, &hbuf, "x-first", "1", ":method", "GET"), true)
	headers(block(enc, &hbuf, ":method", "GET", ":method", "POST", ":path", "/"), true)
	headers(block(enc, &hbuf, ":method", "GET", ":status", "200"), true)
	headers(block(enc, &hbuf, ":bogus", "1"), true)
	headers(block(enc, &hbuf, ":status", "200", "content-type", "text/plain"), false)
	headers(block(enc, &hbuf, "grpc-status", "0", "trailer", "a, b"), true)
	// Past the header list size (400 below): Truncated.
	big := bytes.Repeat([]byte("v"), 300)
	headers(block(enc, &hbuf, append(req, "x-big", string(big))...), true)
	// Split over CONTINUATIONs.
	b := block(enc, &hbuf, append(req, "x-split", "yes")...)
	_ = wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b[:5], EndStream: true})
	_ = wfr.WriteContinuation(id, false, b[5:10])
	_ = wfr.WriteContinuation(id, true, b[10:])
	id += 2
	headers(block(enc, &hbuf, append(req, "x-after", "1")...), true)
	// Far past the limit in one fragment: the connection ends.
	headers(block(enc, &hbuf, append(req, "x-huge", string(bytes.Repeat([]byte("w"), 3000)))...), true)
	stream := wire.Bytes()

	theirs := http2.NewFramer(nil, bytes.NewReader(stream))
	theirs.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	theirs.MaxHeaderListSize = 400
	ofr := http2.NewFramer(nil, bytes.NewReader(stream))
	ofr.SetReuseFrames()
	ours := NewHeaderReader(ofr, hpack.NewDecoder(4096, nil), 400)
	n := 0
	for {
		tf, terr := theirs.ReadFrame()
		of, oerr := ours.ReadFrame()
		if errors.Is(terr, io.EOF) && errors.Is(oerr, io.EOF) {
			break
		}
		want, got := describe(tf, terr), describe(of, oerr)
		if testing.Verbose() {
			t.Logf("block %d: %+v", n, want)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("block %d: got %+v, want (x/net's) %+v", n, got, want)
		}
		n++
		var ce http2.ConnectionError
		if errors.As(terr, &ce) {
			break
		}
	}
	if n != 14 {
		t.Errorf("%d blocks compared, want 14", n)
	}
}

// TestHeaderReaderCompressionError: a block HPACK cannot decode (an index
// past the tables) is a COMPRESSION_ERROR, as with x/net.
func TestHeaderReaderCompressionError(t *testing.T) {
	var wire bytes.Buffer
	wfr := http2.NewFramer(&wire, nil)
	_ = wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0xff, 0x7f}, EndHeaders: true})
	fr := http2.NewFramer(nil, &wire)
	r := NewHeaderReader(fr, hpack.NewDecoder(4096, nil), 0)
	_, err := r.ReadFrame()
	var ce http2.ConnectionError
	if !errors.As(err, &ce) || http2.ErrCode(ce) != http2.ErrCodeCompression {
		t.Errorf("got %v, want a COMPRESSION_ERROR connection error", err)
	}
}

// TestHeaderReaderAllocs: a header block read costs no allocation of
// the reader's (the field strings are HPACK's: indexed ones take none).
func TestHeaderReaderAllocs(t *testing.T) {
	var wire bytes.Buffer
	wfr := http2.NewFramer(&wire, nil)
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	fields := []string{":method", "GET", ":scheme", "http", ":authority", "example.com", ":path", "/a", "user-agent", "t"}
	b := block(enc, &hbuf, fields...) // indexes the fields
	_ = wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b, EndHeaders: true, EndStream: true})
	b = block(enc, &hbuf, fields...) // all from the tables now
	const n = 100
	for i := range n {
		_ = wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(3 + 2*i), BlockFragment: b, EndHeaders: true, EndStream: true})
	}
	rd := bytes.NewReader(wire.Bytes())
	fr := http2.NewFramer(nil, rd)
	r := NewHeaderReader(fr, hpack.NewDecoder(4096, nil), 0)
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(n-1, func() {
		f, err := r.ReadFrame()
		if err != nil || len(f.(*http2.MetaHeadersFrame).Fields) != 5 {
			t.Fatalf("%v %v", f, err)
		}
	})
	// x/net's framer allocates the HeadersFrame it parses.
	if allocs > 1 {
		t.Errorf("%.1f allocations per header block, want at most 1 (the framer's HeadersFrame)", allocs)
	}
}

// FuzzHeaderReader: any header block bytes, split into HEADERS and a
// CONTINUATION, twice on one HPACK state, read as x/net reads them.
func FuzzHeaderReader(f *testing.F) {
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	f.Add(block(enc, &hbuf, ":method", "GET", ":path", "/", "x-a", "1"), block(enc, &hbuf, ":status", "200", "x-a", "1"), uint8(3), uint16(300))
	f.Add([]byte{0xff, 0x7f}, []byte{0x40, 0x01, 'A', 0x01, 'b'}, uint8(1), uint16(0))
	f.Add([]byte{0x3f, 0xe1, 0x1f}, []byte{0x82, 0x84, 0x87}, uint8(0), uint16(100))
	f.Fuzz(func(t *testing.T, b1, b2 []byte, split uint8, maxList uint16) {
		var wire bytes.Buffer
		wfr := http2.NewFramer(&wire, nil)
		for i, b := range [][]byte{b1, b2} {
			id := uint32(1 + 2*i)
			k := min(int(split), len(b))
			if k == 0 {
				_ = wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b, EndHeaders: true, EndStream: true})
				continue
			}
			_ = wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b[:k], EndStream: true})
			_ = wfr.WriteContinuation(id, true, b[k:])
		}
		stream := wire.Bytes()
		theirs := http2.NewFramer(nil, bytes.NewReader(stream))
		theirs.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		theirs.MaxHeaderListSize = uint32(maxList)
		ours := NewHeaderReader(http2.NewFramer(nil, bytes.NewReader(stream)), hpack.NewDecoder(4096, nil), uint32(maxList))
		for n := 0; ; n++ {
			tf, terr := theirs.ReadFrame()
			of, oerr := ours.ReadFrame()
			want, got := describe(tf, terr), describe(of, oerr)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("block %d: got %+v, want (x/net's) %+v", n, got, want)
			}
			if terr != nil {
				return
			}
		}
	})
}

// TestHeaderReaderLimitsAsXNet: blocks at the edges of the header list
// size (a field list that fits exactly or by one byte too few, the
// trailer field's own account, a fragment of exactly twice what is left)
// and field names at the edges of upper case, each read by a fresh reader
// and by x/net's with the same limit, give the same outcome.
func TestHeaderReaderLimitsAsXNet(t *testing.T) {
	// regular: ":status" "200" (42 bytes as the list size counts) and
	// "x-a" "1" (36).
	regular := []string{":status", "200", "x-a", "1"}
	for _, c := range []struct {
		name string
		max  uint32
		raw  []byte   // a fragment as it is, or
		kv   []string // the fields to encode
	}{
		{"fits exactly", 78, nil, regular},
		{"one byte short", 77, nil, regular},
		{"trailer fits exactly", 100, nil, []string{":status", "200", "trailer", "a,b,cd"}},
		{"trailer one byte past", 100, nil, []string{":status", "200", "trailer", "a,b,cde"}},
		{"one-name trailer fits exactly", 40, nil, []string{"trailer", "abcdefgh"}},
		{"one-name trailer past", 40, nil, []string{"trailer", "abcdefghi"}},
		{"fragment of twice what is left", 100, make([]byte, 400), nil},
		{"fragment past it", 100, make([]byte, 401), nil},
		{"upper-case A", 1000, nil, []string{":status", "200", "x-A", "1"}},
		{"upper-case Z", 1000, nil, []string{":status", "200", "x-Z", "1"}},
		{"lower-case edges", 1000, nil, []string{":status", "200", "x-az", "1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			frag := c.raw
			if frag == nil {
				var hbuf bytes.Buffer
				enc := hpack.NewEncoder(&hbuf)
				enc.SetMaxDynamicTableSizeLimit(0)
				frag = block(enc, &hbuf, c.kv...)
			}
			var w bytes.Buffer
			_ = http2.NewFramer(&w, nil).WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: frag, EndHeaders: true, EndStream: true})
			theirs := http2.NewFramer(nil, bytes.NewReader(w.Bytes()))
			theirs.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
			theirs.MaxHeaderListSize = c.max
			ours := NewHeaderReader(http2.NewFramer(nil, bytes.NewReader(w.Bytes())), hpack.NewDecoder(4096, nil), c.max)
			want := describe(theirs.ReadFrame())
			got := describe(ours.ReadFrame())
			t.Logf("%+v", got)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v, want (x/net's) %+v", got, want)
			}
		})
	}
}
