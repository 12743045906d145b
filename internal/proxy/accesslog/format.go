package accesslog

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
)

// DefaultFormat is Envoy's format when a file access log names none
// (source/common/formatter/substitution_format_string.cc).
const DefaultFormat = "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%\" " +
	"%RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% " +
	"\"%REQ(X-FORWARDED-FOR)%\" \"%REQ(USER-AGENT)%\" \"%REQ(X-REQUEST-ID)%\" \"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\"\n"

// startTimeLayout is Envoy's default %START_TIME% (ISO 8601, UTC, ms).
const startTimeLayout = "2006-01-02T15:04:05.000Z"

// op is one command operator.
type op uint8

const (
	opLiteral op = iota
	opStartTime
	opReq
	opResp
	opProtocol
	opResponseCode
	opResponseFlags
	opResponseCodeDetails
	opConnectionTerminationDetails
	opUpstreamTransportFailureReason
	opBytesReceived
	opBytesSent
	opDuration
	opUpstreamHost
	opUpstreamCluster
	opUpstreamLocalAddress
	opDownstreamLocalAddress
	opDownstreamLocalAddressWithoutPort
	opDownstreamRemoteAddress
	opDownstreamRemoteAddressWithoutPort
	opRequestedServerName
	opRouteName
)

// operators are the command operators strait-proxy fills (those of
// Istio's default text and JSON formats and a few of their kin); any
// other is refused by name when the config is loaded.
var operators = map[string]op{
	"START_TIME":                             opStartTime,
	"REQ":                                    opReq,
	"RESP":                                   opResp,
	"PROTOCOL":                               opProtocol,
	"RESPONSE_CODE":                          opResponseCode,
	"RESPONSE_FLAGS":                         opResponseFlags,
	"RESPONSE_CODE_DETAILS":                  opResponseCodeDetails,
	"CONNECTION_TERMINATION_DETAILS":         opConnectionTerminationDetails,
	"UPSTREAM_TRANSPORT_FAILURE_REASON":      opUpstreamTransportFailureReason,
	"BYTES_RECEIVED":                         opBytesReceived,
	"BYTES_SENT":                             opBytesSent,
	"DURATION":                               opDuration,
	"UPSTREAM_HOST":                          opUpstreamHost,
	"UPSTREAM_CLUSTER":                       opUpstreamCluster,
	"UPSTREAM_CLUSTER_RAW":                   opUpstreamCluster,
	"UPSTREAM_LOCAL_ADDRESS":                 opUpstreamLocalAddress,
	"DOWNSTREAM_LOCAL_ADDRESS":               opDownstreamLocalAddress,
	"DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT":  opDownstreamLocalAddressWithoutPort,
	"DOWNSTREAM_REMOTE_ADDRESS":              opDownstreamRemoteAddress,
	"DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT": opDownstreamRemoteAddressWithoutPort,
	"REQUESTED_SERVER_NAME":                  opRequestedServerName,
	"ROUTE_NAME":                             opRouteName,
}

// numeric operators are JSON numbers when they are a value's only content.
func (o op) numeric() bool {
	switch o {
	case opResponseCode, opBytesReceived, opBytesSent, opDuration:
		return true
	}
	return false
}

// segment is a literal or an operator with its header names (REQ/RESP:
// the main and the alternative, lower case) and truncation (0: none).
type segment struct {
	op       op
	literal  string
	main     string
	alt      string
	maxBytes int
}

// text is a compiled format string.
type text []segment

// Format is a compiled access log format: text, or JSON (one text per
// key, keys sorted, a line per record). Read-only once built.
type Format struct {
	text text
	keys []string
	vals []text
}

// ParseText compiles an Envoy format string; an operator strait-proxy
// does not fill is an error naming it.
func ParseText(s string) (*Format, error) {
	t, err := parseText(s)
	if err != nil {
		return nil, err
	}
	return &Format{text: t}, nil
}

// ParseJSON compiles a json_format: every value must be a string (a
// format string); nested objects and other types are refused.
func ParseJSON(st *structpb.Struct) (*Format, error) {
	f := &Format{}
	for k := range st.GetFields() {
		f.keys = append(f.keys, k)
	}
	slices.Sort(f.keys)
	for _, k := range f.keys {
		v := st.GetFields()[k]
		s, ok := v.GetKind().(*structpb.Value_StringValue)
		if !ok {
			return nil, fmt.Errorf("json_format %q: only string values (format strings) are supported, not %T", k, v.GetKind())
		}
		t, err := parseText(s.StringValue)
		if err != nil {
			return nil, fmt.Errorf("json_format %q: %w", k, err)
		}
		f.vals = append(f.vals, t)
	}
	return f, nil
}

func parseText(s string) (text, error) {
	var out text
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			out = append(out, segment{op: opLiteral, literal: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		if s[i] != '%' {
			lit.WriteByte(s[i])
			i++
			continue
		}
		if strings.HasPrefix(s[i:], "%%") {
			lit.WriteByte('%')
			i += 2
			continue
		}
		end := operatorEnd(s, i+1)
		if end < 0 {
			return nil, fmt.Errorf("format %q: unterminated command operator at byte %d (write %%%% for a literal %%)", s, i)
		}
		seg, err := parseOperator(s[i+1 : end])
		if err != nil {
			return nil, err
		}
		flush()
		out = append(out, seg)
		i = end + 1
	}
	flush()
	return out, nil
}

// operatorEnd finds the '%' that closes the operator starting at from,
// skipping parentheses (a header name may hold no '%', but be strict).
func operatorEnd(s string, from int) int {
	depth := 0
	for j := from; j < len(s); j++ {
		switch s[j] {
		case '(':
			depth++
		case ')':
			depth--
		case '%':
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

// parseOperator reads NAME, NAME(ARG) or NAME(ARG):MAX.
func parseOperator(body string) (segment, error) {
	name, arg, hasArg := body, "", false
	var maxBytes int
	if i := strings.IndexByte(body, '('); i >= 0 {
		j := strings.LastIndexByte(body, ')')
		if j < i {
			return segment{}, fmt.Errorf("command operator %%%s%%: unbalanced parentheses", body)
		}
		name, arg, hasArg = body[:i], body[i+1:j], true
		if rest := body[j+1:]; rest != "" {
			n, err := strconv.Atoi(strings.TrimPrefix(rest, ":"))
			if !strings.HasPrefix(rest, ":") || err != nil || n <= 0 {
				return segment{}, fmt.Errorf("command operator %%%s%%: %q is not a length (want :N)", body, rest)
			}
			maxBytes = n
		}
	}
	o, ok := operators[name]
	if !ok {
		return segment{}, fmt.Errorf("command operator %%%s%% is not supported by strait-proxy (supported: %s)", name, supportedList())
	}
	seg := segment{op: o, maxBytes: maxBytes}
	switch o {
	case opReq, opResp:
		if !hasArg || arg == "" {
			return segment{}, fmt.Errorf("command operator %%%s%% needs a header name: %%%s(NAME)%%", name, name)
		}
		main, alt, _ := strings.Cut(arg, "?")
		seg.main, seg.alt = strings.ToLower(main), strings.ToLower(alt)
	case opStartTime:
		if hasArg && arg != "" {
			return segment{}, fmt.Errorf("command operator %%START_TIME(%s)%%: a custom time format is not supported by strait-proxy (use %%START_TIME%%)", arg)
		}
	default:
		if hasArg {
			return segment{}, fmt.Errorf("command operator %%%s%% takes no argument", name)
		}
	}
	if maxBytes > 0 && o != opReq && o != opResp {
		return segment{}, fmt.Errorf("command operator %%%s%%: a length limit is only supported on REQ and RESP", name)
	}
	return seg, nil
}

func supportedList() string {
	names := make([]string, 0, len(operators))
	for n := range operators {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// Append formats r onto b: a text line, or a JSON object and a newline.
func (f *Format) Append(b []byte, r *Record) []byte {
	if f.keys == nil {
		return f.text.append(b, r)
	}
	b = append(b, '{')
	for i, k := range f.keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		t := f.vals[i]
		if len(t) == 1 && t[0].op != opLiteral {
			// A lone operator: a number for numeric ones, null when the
			// value is unavailable.
			v, ok := t[0].value(nil, r)
			switch {
			case !ok:
				b = append(b, "null"...)
			case t[0].op.numeric():
				b = append(b, v...)
			default:
				b = appendJSONString(b, string(v))
			}
			continue
		}
		b = appendJSONString(b, string(t.append(nil, r)))
	}
	return append(b, "}\n"...)
}

func (t text) append(b []byte, r *Record) []byte {
	for i := range t {
		if t[i].op == opLiteral {
			b = append(b, t[i].literal...)
			continue
		}
		v, ok := t[i].value(b[len(b):], r)
		if !ok {
			b = append(b, '-')
			continue
		}
		b = append(b, v...)
	}
	return b
}

// value appends the operator's value for r to dst[:0] and returns it,
// or false when the value is unavailable (Envoy prints "-").
func (s *segment) value(dst []byte, r *Record) ([]byte, bool) {
	str := func(v string) ([]byte, bool) {
		if v == "" {
			return nil, false
		}
		return append(dst, v...), true
	}
	switch s.op {
	case opStartTime:
		return r.Start.UTC().AppendFormat(dst, startTimeLayout), true
	case opReq, opResp:
		h := r.Request
		if s.op == opResp {
			h = r.Response
		}
		v, ok := r.header(h, s.main, s.op == opReq)
		if !ok && s.alt != "" {
			v, ok = r.header(h, s.alt, s.op == opReq)
		}
		if !ok || v == "" {
			return nil, false
		}
		if s.maxBytes > 0 && len(v) > s.maxBytes {
			v = v[:s.maxBytes]
		}
		return append(dst, v...), true
	case opProtocol:
		return str(r.Protocol)
	case opResponseCode:
		return strconv.AppendInt(dst, int64(r.Code), 10), true
	case opResponseFlags:
		// "-" is the value itself when there are none (a string in JSON,
		// as Envoy's ResponseFlagUtils prints it).
		if r.Flags == "" {
			return append(dst, '-'), true
		}
		return append(dst, r.Flags...), true
	case opResponseCodeDetails:
		return str(r.Details)
	case opConnectionTerminationDetails:
		return str(r.TerminationDetails)
	case opUpstreamTransportFailureReason:
		return str(r.TransportFailure)
	case opBytesReceived:
		return strconv.AppendInt(dst, r.BytesReceived, 10), true
	case opBytesSent:
		return strconv.AppendInt(dst, r.BytesSent, 10), true
	case opDuration:
		return strconv.AppendInt(dst, r.Duration.Milliseconds(), 10), true
	case opUpstreamHost:
		return str(r.UpstreamHost)
	case opUpstreamCluster:
		return str(r.UpstreamCluster)
	case opUpstreamLocalAddress:
		return str(r.UpstreamLocal)
	case opDownstreamLocalAddress:
		if !r.DownstreamLocal.IsValid() {
			return nil, false
		}
		return r.DownstreamLocal.AppendTo(dst), true
	case opDownstreamLocalAddressWithoutPort:
		if !r.DownstreamLocal.IsValid() {
			return nil, false
		}
		return r.DownstreamLocal.Addr().AppendTo(dst), true
	case opDownstreamRemoteAddress:
		if !r.DownstreamRemote.IsValid() {
			return nil, false
		}
		return r.DownstreamRemote.AppendTo(dst), true
	case opDownstreamRemoteAddressWithoutPort:
		if !r.DownstreamRemote.IsValid() {
			return nil, false
		}
		return r.DownstreamRemote.Addr().AppendTo(dst), true
	case opRequestedServerName:
		return str(r.SNI)
	case opRouteName:
		return str(r.RouteName)
	}
	return nil, false
}

func appendJSONString(b []byte, s string) []byte {
	enc, _ := json.Marshal(s) // never fails for a string
	return append(b, enc...)
}
