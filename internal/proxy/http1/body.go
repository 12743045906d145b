package http1

import (
	"errors"
	"io"
)

// MaxTrailerBytes bounds the trailer section of a chunked body.
const MaxTrailerBytes = 8 << 10

const maxChunkLine = 4 << 10

// LengthReader reads a Content-Length body.
type LengthReader struct {
	R    *Reader
	Left int64
}

func (l *LengthReader) Read(p []byte) (int, error) {
	if l.Left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > l.Left {
		p = p[:l.Left]
	}
	n, err := l.R.Read(p)
	l.Left -= int64(n)
	if errors.Is(err, io.EOF) {
		if l.Left > 0 {
			err = io.ErrUnexpectedEOF
		} else {
			err = nil
		}
	}
	return n, err
}

// ChunkedReader decodes a chunked body; the data it returns is the
// decoded payload. After io.EOF, Trailer holds the raw trailer fields (each
// line with its CRLF), if any.
type ChunkedReader struct {
	R       *Reader
	Trailer []byte
	left    int64
	state   uint8
}

const (
	chunkSize = iota
	chunkData
	chunkEnd
	chunkDone
)

// Reset prepares c to read a new body from r.
func (c *ChunkedReader) Reset(r *Reader) {
	c.R, c.Trailer, c.left, c.state = r, c.Trailer[:0], 0, chunkSize
}

// Done reports whether the whole body, trailers included, has been read.
func (c *ChunkedReader) Done() bool { return c.state == chunkDone }

func (c *ChunkedReader) Read(p []byte) (int, error) {
	for {
		switch c.state {
		case chunkDone:
			return 0, io.EOF
		case chunkSize:
			line, err := c.R.readLine(maxChunkLine)
			if err != nil {
				return 0, err
			}
			n, ok := parseChunkSize(line)
			if !ok {
				return 0, ErrMalformed
			}
			if n == 0 {
				if err := c.readTrailer(); err != nil {
					return 0, err
				}
				c.state = chunkDone
				return 0, io.EOF
			}
			c.left, c.state = n, chunkData
		case chunkData:
			if len(p) == 0 {
				return 0, nil
			}
			q := p
			if int64(len(q)) > c.left {
				q = q[:c.left]
			}
			n, err := c.R.Read(q)
			c.left -= int64(n)
			if c.left == 0 {
				c.state = chunkEnd
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			if n > 0 || err != nil {
				return n, err
			}
		case chunkEnd:
			line, err := c.R.readLine(maxChunkLine)
			if err != nil {
				return 0, err
			}
			if len(line) != 0 {
				return 0, ErrMalformed
			}
			c.state = chunkSize
		}
	}
}

func (c *ChunkedReader) readTrailer() error {
	c.Trailer = c.Trailer[:0]
	for {
		line, err := c.R.readLine(maxChunkLine)
		if err != nil {
			return err
		}
		if len(line) == 0 {
			return nil
		}
		colon := -1
		for i, b := range line {
			if b == ':' {
				colon = i
				break
			}
		}
		if colon <= 0 || !isToken(line[:colon]) {
			return ErrMalformed
		}
		for _, b := range line[colon+1:] {
			if b < ' ' && b != '\t' || b == 0x7f {
				return ErrMalformed
			}
		}
		if len(c.Trailer)+len(line)+2 > MaxTrailerBytes {
			return ErrHeaderTooLarge
		}
		c.Trailer = append(c.Trailer, line...)
		c.Trailer = append(c.Trailer, '\r', '\n')
	}
}

// parseChunkSize parses "hex[ ;ext]".
func parseChunkSize(line []byte) (int64, bool) {
	var n int64
	i := 0
	for ; i < len(line); i++ {
		c := line[i]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			goto ext
		}
		if i >= 15 {
			return 0, false // more than 60 bits
		}
		n = n<<4 | int64(d)
	}
ext:
	if i == 0 {
		return 0, false
	}
	for ; i < len(line) && (line[i] == ' ' || line[i] == '\t'); i++ {
	}
	if i < len(line) && line[i] != ';' {
		return 0, false
	}
	for ; i < len(line); i++ {
		if c := line[i]; c < ' ' && c != '\t' || c == 0x7f {
			return 0, false
		}
	}
	return n, true
}

// ChunkHeadroom is the room AppendChunk needs before the data for the
// chunk-size line.
const ChunkHeadroom = 18

// FrameChunk turns buf[ChunkHeadroom:ChunkHeadroom+n] (data already read
// there) into a complete chunk in place and returns it; buf needs 2 spare
// bytes after the data for the CRLF.
func FrameChunk(buf []byte, n int) []byte {
	const hex = "0123456789abcdef"
	i := ChunkHeadroom
	i -= 2
	buf[i], buf[i+1] = '\r', '\n'
	v := n
	for {
		i--
		buf[i] = hex[v&0xf]
		v >>= 4
		if v == 0 {
			break
		}
	}
	end := ChunkHeadroom + n
	buf[end], buf[end+1] = '\r', '\n'
	return buf[i : end+2]
}

// AppendLastChunk appends the last chunk with the given raw trailer fields.
func AppendLastChunk(dst, trailer []byte) []byte {
	dst = append(dst, '0', '\r', '\n')
	dst = append(dst, trailer...)
	return append(dst, '\r', '\n')
}

// AppendInt appends n in decimal.
func AppendInt(dst []byte, n int64) []byte {
	if n == 0 {
		return append(dst, '0')
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return append(dst, b[i:]...)
}

// AppendHeader appends "name: value\r\n".
func AppendHeader(dst, name, value []byte) []byte {
	dst = append(dst, name...)
	dst = append(dst, ':', ' ')
	dst = append(dst, value...)
	return append(dst, '\r', '\n')
}
