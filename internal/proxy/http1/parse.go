package http1

import (
	"bytes"
	"encoding/binary"
	"strings"
	"unsafe"
)

// MaxHeaders bounds the number of header fields in one head (Envoy's
// default max_headers_count).
const MaxHeaders = 100

// Header is one header field. Name and Value alias the Reader's buffer.
type Header struct {
	Name, Value []byte
	// Hop marks hop-by-hop fields (RFC 9110 §7.6.1): the fixed list and the
	// fields named by Connection. A proxy doesn't forward them.
	Hop bool
}

// Headers is a head's fields in the order received.
type Headers []Header

// Get returns the first value of name (case-insensitive).
func (h Headers) Get(name string) ([]byte, bool) {
	for i := range h {
		if equalFold(h[i].Name, name) {
			return h[i].Value, true
		}
	}
	return nil, false
}

// Lookup returns the values of name joined with ",", as route matching
// wants them. A single value aliases the buffer (no copy): use the result
// before the next read. It has a pointer receiver so that passing &h as an
// interface doesn't allocate.
func (h *Headers) Lookup(name string) (string, bool) {
	hs := *h
	var first []byte
	n := 0
	for i := range hs {
		if equalFold(hs[i].Name, name) {
			if n == 0 {
				first = hs[i].Value
			}
			n++
		}
	}
	switch n {
	case 0:
		return "", false
	case 1:
		return unsafeString(first), true
	}
	var sb strings.Builder
	for i := range hs {
		if equalFold(hs[i].Name, name) {
			if sb.Len() > 0 {
				sb.WriteByte(',')
			}
			sb.Write(hs[i].Value)
		}
	}
	return sb.String(), true
}

func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// UnsafeString returns b as a string without copying; it is valid only as
// long as b is not modified (for Reader slices: until the next read).
func UnsafeString(b []byte) string { return unsafeString(b) }

// Framing is how a message body is delimited.
type Framing uint8

// The ways of delimiting a body.
const (
	FramingNone    Framing = iota // no body
	FramingLength                 // Content-Length bytes
	FramingChunked                // chunked transfer coding
	FramingClose                  // until the connection closes (responses only)
)

// message is what requests and responses share.
type message struct {
	Minor         int // HTTP/1.Minor, 0 or 1
	Headers       Headers
	Framing       Framing
	ContentLength int64 // with FramingLength; also set (>= 0) when a response to HEAD carries one
	// Close is set when the connection does not persist after this message
	// (Connection: close, or HTTP/1.0 without keep-alive).
	Close bool
	// Upgrade is set when Connection names "upgrade".
	Upgrade bool

	hosts     int // Host fields seen
	host      []byte
	expect100 bool
}

// Request is a parsed request head. Reuse one per connection: Parse resets it.
type Request struct {
	message
	Method []byte
	Target []byte // request-target as received
	// Path is the target's path (origin-form, or the path of absolute-form),
	// without the query; Query includes its '?'.
	Path, Query []byte
	// Authority is the host of an absolute-form target; Host is the Host
	// header, or Authority when set. HasHost reports a Host header.
	Authority, Host []byte
	HasHost         bool
	Expect100       bool // Expect: 100-continue
	IsHead          bool
}

// Response is a parsed response head.
type Response struct {
	message
	Status int
	Reason []byte
}

// ParseRequest parses a head returned by Reader.ReadHead into req, with
// at most MaxHeaders header fields.
func ParseRequest(head []byte, req *Request) error {
	return ParseRequestLimit(head, req, MaxHeaders)
}

// ParseRequestLimit is ParseRequest with at most maxHeaders header fields
// (HCM max_headers_count); more is ErrTooManyHeaders.
func ParseRequestLimit(head []byte, req *Request, maxHeaders int) error {
	hs := req.Headers[:0]
	*req = Request{}
	req.Headers = hs
	req.ContentLength = -1
	line, rest := cutLine(head)
	// method SP request-target SP HTTP-version
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 || !isToken(line[:sp]) {
		return ErrMalformed
	}
	req.Method = line[:sp]
	line = line[sp+1:]
	sp = bytes.IndexByte(line, ' ')
	if sp <= 0 {
		return ErrMalformed
	}
	req.Target = line[:sp]
	minor, ok := parseVersion(line[sp+1:])
	if !ok {
		return ErrMalformed
	}
	req.Minor = minor
	for _, c := range req.Target {
		if c <= ' ' || c == 0x7f {
			return ErrMalformed
		}
	}
	if err := splitTarget(req); err != nil {
		return err
	}
	req.IsHead = string(req.Method) == "HEAD"
	if err := parseFields(rest, &req.message, true, maxHeaders); err != nil {
		return err
	}
	if req.hosts > 1 {
		return ErrMalformed // more than one Host
	}
	req.HasHost, req.Host, req.Expect100 = req.hosts == 1, req.host, req.expect100
	if req.Authority != nil {
		req.Host = req.Authority
	}
	if req.Minor == 1 && !req.HasHost {
		return ErrMalformed // RFC 9112 §3.2
	}
	for _, c := range req.Host {
		if !hostChars[c] {
			return ErrMalformed
		}
	}
	return nil
}

// hostChars are the bytes a Host (or absolute-form authority) may hold:
// RFC 3986 reg-name, IP-literal and port characters, and "@" (an HTTP/1.1
// Host may carry userinfo), as Envoy's check_authority_h1_h2
// (source/common/http/header_utility.cc) allows; net/http's
// httpguts.ValidHostHeader refuses "@".
var hostChars = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!$%&'()*+,-.:;=@[]_~" {
		t[c] = true
	}
	return t
}()

func splitTarget(req *Request) error {
	t := req.Target
	switch {
	case t[0] == '/':
	case len(t) > 7 && equalFold(t[:7], "http://"), len(t) > 8 && equalFold(t[:8], "https://"):
		rest := t[bytes.IndexByte(t, ':')+3:]
		end := bytes.IndexAny(rest, "/?")
		if end < 0 {
			end = len(rest)
		}
		if end == 0 {
			return ErrMalformed
		}
		auth := rest[:end]
		for _, c := range auth {
			if !hostChars[c] { // userinfo included (RFC 3986 §3.2.1)
				return ErrMalformed
			}
		}
		if at := bytes.LastIndexByte(auth, '@'); at >= 0 {
			// userinfo (RFC 9110 §4.2.4: deprecated in http URIs) is never
			// forwarded: the authority is the host after it.
			auth = auth[at+1:]
			if len(auth) == 0 {
				return ErrMalformed
			}
		}
		req.Authority = auth
		t = rest[end:]
		if len(t) == 0 || t[0] == '?' {
			// An absolute-form target without a path means "/".
			req.Path = slash
			req.Query = t
			return nil
		}
	case len(t) == 1 && t[0] == '*':
		req.Path = t
		return nil
	default:
		// authority-form (CONNECT) and anything else.
		return ErrMalformed
	}
	if q := bytes.IndexByte(t, '?'); q >= 0 {
		req.Path, req.Query = t[:q], t[q:]
	} else {
		req.Path = t
	}
	return nil
}

var slash = []byte("/")

// ParseResponse parses a response head. isHeadRequest is whether the
// request was HEAD (its response has no body whatever it says).
func ParseResponse(head []byte, resp *Response, isHeadRequest bool) error {
	hs := resp.Headers[:0]
	*resp = Response{}
	resp.Headers = hs
	resp.ContentLength = -1
	line, rest := cutLine(head)
	// HTTP-version SP status-code SP [reason-phrase]
	if len(line) < 12 || line[8] != ' ' {
		return ErrMalformed
	}
	minor, ok := parseVersion(line[:8])
	if !ok {
		return ErrMalformed
	}
	resp.Minor = minor
	c := line[9:12]
	if c[0] < '1' || c[0] > '5' || c[1] < '0' || c[1] > '9' || c[2] < '0' || c[2] > '9' {
		return ErrMalformed
	}
	resp.Status = int(c[0]-'0')*100 + int(c[1]-'0')*10 + int(c[2]-'0')
	if len(line) > 12 {
		if line[12] != ' ' {
			return ErrMalformed
		}
		resp.Reason = line[13:]
		for _, b := range resp.Reason {
			if b < ' ' && b != '\t' || b == 0x7f {
				return ErrMalformed
			}
		}
	}
	if err := parseFields(rest, &resp.message, false, MaxHeaders); err != nil {
		return err
	}
	if isHeadRequest || resp.Status < 200 || resp.Status == 204 || resp.Status == 304 {
		resp.Framing = FramingNone
	}
	return nil
}

// NoBody reports whether a response with this status never has a body.
func NoBody(status int) bool { return status < 200 || status == 204 || status == 304 }

// cutLine splits off the first line (without its ending).
func cutLine(p []byte) (line, rest []byte) {
	i := bytes.IndexByte(p, '\n')
	if i < 0 {
		return p, nil
	}
	line, rest = p[:i], p[i+1:]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, rest
}

func parseVersion(v []byte) (int, bool) {
	if len(v) != 8 || string(v[:7]) != "HTTP/1." {
		return 0, false
	}
	switch v[7] {
	case '0':
		return 0, true
	case '1':
		return 1, true
	}
	return 0, false
}

// fieldKind is what the codec needs to know about a field name.
type fieldKind uint8

const (
	fieldOther      fieldKind = iota
	fieldHop                  // fixed hop-by-hop field (RFC 9110 §7.6.1)
	fieldConnection           // Connection or Proxy-Connection (also hop-by-hop)
	fieldTransferEncoding
	fieldContentLength
	fieldHost
	fieldExpect
)

// classify looks at the length first so that most fields cost one
// comparison at most.
func classify(name []byte) fieldKind {
	switch len(name) {
	case 2:
		if equalFold(name, "Te") {
			return fieldHop
		}
	case 4:
		if equalFold(name, "Host") {
			return fieldHost
		}
	case 6:
		if equalFold(name, "Expect") {
			return fieldExpect
		}
	case 7:
		if equalFold(name, "Upgrade") || equalFold(name, "Trailer") {
			return fieldHop
		}
	case 10:
		if equalFold(name, "Connection") {
			return fieldConnection
		}
		if equalFold(name, "Keep-Alive") {
			return fieldHop
		}
	case 14:
		if equalFold(name, "Content-Length") {
			return fieldContentLength
		}
		if equalFold(name, "HTTP2-Settings") {
			// Connection-specific (RFC 9113 §3.2.1), sent only with
			// Upgrade: h2c, which a proxy serves as HTTP/1.1 (Envoy's
			// HTTP/1 codec drops it with the upgrade, onHeadersCompleteBase).
			return fieldHop
		}
	case 16:
		if equalFold(name, "Proxy-Connection") {
			return fieldConnection
		}
	case 17:
		if equalFold(name, "Transfer-Encoding") {
			return fieldTransferEncoding
		}
	case 18:
		if equalFold(name, "Proxy-Authenticate") {
			return fieldHop
		}
	case 19:
		if equalFold(name, "Proxy-Authorization") {
			return fieldHop
		}
	}
	return fieldOther
}

// parseFields parses header fields into m and derives framing and
// persistence. isRequest selects request rules (no close-delimited body,
// Content-Length with Transfer-Encoding rejected).
func parseFields(p []byte, m *message, isRequest bool, maxHeaders int) error {
	var te, cl, keepAlive, conns bool
	for len(p) > 0 {
		var line []byte
		line, p = cutLine(p)
		if len(line) == 0 {
			break // the empty line that ends the head
		}
		if line[0] == ' ' || line[0] == '\t' {
			return ErrMalformed // obs-fold (RFC 9112 §5.2)
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !isToken(line[:colon]) {
			return ErrMalformed
		}
		name, value := line[:colon], trimOWS(line[colon+1:])
		if !validValue(value) {
			return ErrMalformed
		}
		if len(m.Headers) >= maxHeaders {
			return ErrTooManyHeaders
		}
		kind := classify(name)
		m.Headers = append(m.Headers, Header{Name: name, Value: value,
			Hop: kind == fieldHop || kind == fieldConnection || kind == fieldTransferEncoding})
		switch kind {
		case fieldHost:
			if m.hosts++; m.hosts == 1 {
				m.host = value
			}
		case fieldExpect:
			if equalFold(value, "100-continue") {
				m.expect100 = true
			}
		case fieldContentLength:
			n, ok := parseContentLength(value)
			if !ok || cl && n != m.ContentLength {
				return ErrMalformed
			}
			cl, m.ContentLength = true, n
		case fieldTransferEncoding:
			if te || !equalFold(value, "chunked") {
				// Only a single "chunked" is supported; anything else can't
				// be framed safely.
				return ErrMalformed
			}
			te = true
		case fieldConnection:
			conns = true
			for v := value; len(v) > 0; {
				var tok []byte
				tok, v = nextToken(v)
				switch {
				case equalFold(tok, "close"):
					m.Close = true
				case equalFold(tok, "keep-alive"):
					keepAlive = true
				case equalFold(tok, "upgrade"):
					m.Upgrade = true
				}
			}
		}
	}
	if len(p) != 0 {
		return ErrMalformed
	}
	if m.Minor == 0 && !keepAlive {
		m.Close = true
	}
	if conns {
		// Fields named by Connection are hop-by-hop too, except Host: a
		// request must keep it (RFC 9112 §3.2), whatever Connection says.
		for i := range m.Headers {
			h := &m.Headers[i]
			if classify(h.Name) != fieldConnection {
				continue
			}
			for v := h.Value; len(v) > 0; {
				var tok []byte
				tok, v = nextToken(v)
				for j := range m.Headers {
					if equalFold(m.Headers[j].Name, unsafeString(tok)) && classify(m.Headers[j].Name) != fieldHost {
						m.Headers[j].Hop = true
					}
				}
			}
		}
	}
	switch {
	case te:
		if cl && isRequest {
			return ErrMalformed // request smuggling vector (RFC 9112 §6.3)
		}
		if m.Minor == 0 && isRequest {
			return ErrMalformed
		}
		m.Framing = FramingChunked
		m.ContentLength = -1
	case cl:
		m.Framing = FramingLength
		if isRequest && m.ContentLength == 0 {
			m.Framing = FramingNone
		}
	case isRequest:
		m.Framing = FramingNone
	default:
		m.Framing = FramingClose
	}
	return nil
}

// validValue reports whether v holds no control character but HTAB
// (RFC 9110 §5.5: field-vchar, SP, HTAB and obs-text). Long values (the
// ~300-byte x-envoy-peer-metadata on every mesh request) are checked
// eight bytes a word, four words a round: a round with no byte below
// 0x20 and none equal to 0x7f is valid as a whole (one branch for 32
// bytes); a round or word with one is checked byte by byte (it may be a
// tab).
func validValue(v []byte) bool {
	for len(v) >= 32 {
		m := ctlMask(binary.LittleEndian.Uint64(v)) | ctlMask(binary.LittleEndian.Uint64(v[8:])) |
			ctlMask(binary.LittleEndian.Uint64(v[16:])) | ctlMask(binary.LittleEndian.Uint64(v[24:]))
		if m != 0 && !validBytes(v[:32]) {
			return false
		}
		v = v[32:]
	}
	for len(v) >= 8 {
		if ctlMask(binary.LittleEndian.Uint64(v)) != 0 && !validBytes(v[:8]) {
			return false
		}
		v = v[8:]
	}
	return validBytes(v)
}

// ctlMask is non-zero iff one of the eight bytes of x is a control
// character (below 0x20, or 0x7f): the first term has a byte's high bit
// set iff some byte of x is below 0x20, the second iff some byte equals
// 0x7f (both exact as "any").
func ctlMask(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	del := x ^ (0x7f * ones)
	return ((x-0x20*ones)&^x | (del-ones)&^del) & highs
}

// validBytes is validValue one byte at a time.
func validBytes(v []byte) bool {
	for _, c := range v {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func nextToken(v []byte) (tok, rest []byte) {
	if i := bytes.IndexByte(v, ','); i >= 0 {
		tok, rest = v[:i], v[i+1:]
	} else {
		tok = v
	}
	return trimOWS(tok), rest
}

func parseContentLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func trimOWS(v []byte) []byte {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}

// tokenChars are RFC 9110 tchar.
var tokenChars = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !tokenChars[c] {
			return false
		}
	}
	return true
}

// equalFold compares ASCII case-insensitively.
func equalFold[T []byte | string](a []byte, b T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if x|0x20 != y|0x20 || x|0x20 < 'a' || x|0x20 > 'z' {
			return false
		}
	}
	return true
}

// EqualFold reports whether name equals s, ASCII case-insensitively.
func EqualFold(name []byte, s string) bool { return equalFold(name, s) }
