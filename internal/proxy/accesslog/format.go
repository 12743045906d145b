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

// segment is a literal or an operator with what its argument said:
// REQ/RESP's header names (the main and the alternative, lower case), a
// time format, the address part, a length limit.
type segment struct {
	op          op
	part        addrPart
	literal     string // opLiteral, and opConst's value
	hasConst    bool   // opConst: the value is set (else "-")
	main, alt   string
	time        timeFormat
	hasLength   bool
	maxBytes    int
	allowSpaces bool // RESPONSE_CODE_DETAILS(ALLOW_WHITESPACES)
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
		name, arg, hasArg, length, n, err := scanOperator(s[i:])
		if err != nil {
			return nil, fmt.Errorf("format %q at byte %d: %w", s, i, err)
		}
		seg, err := parseOperator(name, arg, hasArg, length)
		if err != nil {
			return nil, err
		}
		flush()
		out = append(out, seg)
		i += n
	}
	flush()
	return out, nil
}

// scanOperator reads a command operator at the start of s as Envoy's
// SubstitutionFormatParser does (%NAME(ARG):LENGTH%: NAME of [A-Z0-9_],
// ARG without ')', LENGTH digits) and returns its parts and length.
func scanOperator(s string) (name, arg string, hasArg bool, length string, n int, err error) {
	bad := func(why string) (string, string, bool, string, int, error) {
		return "", "", false, "", 0, fmt.Errorf("%s (an operator is %%NAME%%, %%NAME(ARG)%% or %%NAME(ARG):N%%; write %%%% for a literal %%)", why)
	}
	i := 1
	for i < len(s) && (s[i] >= 'A' && s[i] <= 'Z' || s[i] >= '0' && s[i] <= '9' || s[i] == '_') {
		i++
	}
	if i == 1 {
		return bad("no command operator after %")
	}
	name = s[1:i]
	if i < len(s) && s[i] == '(' {
		j := strings.IndexByte(s[i:], ')')
		if j < 0 {
			return bad(fmt.Sprintf("%%%s( has no closing parenthesis", name))
		}
		arg, hasArg = s[i+1:i+j], true
		i += j + 1
	}
	if i < len(s) && s[i] == ':' {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i+1 {
			return bad(fmt.Sprintf("%%%s: a length must be digits", name))
		}
		length = s[i+1 : j]
		i = j
	}
	if i >= len(s) || s[i] != '%' {
		return bad(fmt.Sprintf("command operator %%%s is not closed by %%", name))
	}
	return name, arg, hasArg, length, i + 1, nil
}

// parseOperator checks an operator's syntax as Envoy's
// CommandSyntaxChecker does and compiles it; an Envoy operator
// strait-proxy does not fill is an error naming it.
func parseOperator(name, arg string, hasArg bool, length string) (segment, error) {
	spec, ok := operators[name]
	if !ok {
		if what, envoy := notImplemented[name]; envoy {
			return segment{}, fmt.Errorf("command operator %%%s%% is not supported by strait-proxy (it does not record %s); remove it from the format", name, what)
		}
		return segment{}, fmt.Errorf("command operator %%%s%% is not supported by strait-proxy: not an Envoy command operator it knows (supported: %s)", name, supportedList())
	}
	seg := segment{op: spec.op, part: spec.part}
	switch {
	case spec.arg == argNone && hasArg:
		return segment{}, fmt.Errorf("command operator %%%s%% takes no argument: write %%%s%%", name, name)
	case spec.arg == argRequired && arg == "":
		return segment{}, fmt.Errorf("command operator %%%s%% needs an argument: %%%s(...)%%", name, name)
	}
	if length != "" {
		if !spec.length {
			return segment{}, fmt.Errorf("command operator %%%s%%: a length limit (:%s) is not allowed on it", name, length)
		}
		n, err := strconv.Atoi(length)
		if err != nil {
			return segment{}, fmt.Errorf("command operator %%%s%%: length %q is not a number", name, length)
		}
		seg.hasLength, seg.maxBytes = true, n
	}
	switch spec.op {
	case opReq, opResp:
		main, alt, _ := strings.Cut(arg, "?")
		if strings.Contains(alt, "?") {
			return segment{}, fmt.Errorf("command operator %%%s(%s)%%: more than one alternative header", name, arg)
		}
		seg.main, seg.alt = strings.ToLower(main), strings.ToLower(alt)
		for _, h := range []string{seg.main, seg.alt} {
			if err := checkPseudoHeader(name, h, spec.op == opReq); err != nil {
				return segment{}, err
			}
		}
	case opStartTime, opEmitTime, opPeerCertVStart, opPeerCertVEnd:
		tf, err := parseTimeFormat(arg)
		if err != nil {
			return segment{}, fmt.Errorf("command operator %%%s(%s)%%: %w", name, arg, err)
		}
		seg.time = tf
	case opResponseCodeDetails:
		if hasArg && arg != "ALLOW_WHITESPACES" {
			return segment{}, fmt.Errorf("command operator %%%s(%s)%%: the only argument is ALLOW_WHITESPACES", name, arg)
		}
		seg.allowSpaces = arg == "ALLOW_WHITESPACES"
	case opConst:
		if err := constValue(name, arg, &seg); err != nil {
			return segment{}, err
		}
	}
	return seg, nil
}

// checkPseudoHeader refuses the pseudo-headers strait-proxy does not
// record: a request's :method, :path and :authority and a response's
// :status are known.
func checkPseudoHeader(op, h string, request bool) error {
	if h == "" || h[0] != ':' {
		return nil
	}
	switch {
	case request && (h == ":method" || h == ":path" || h == ":authority"):
		return nil
	case !request && h == ":status":
		return nil
	}
	return fmt.Errorf("command operator %%%s%%: pseudo-header %s is not recorded by strait-proxy (known: :method, :path, :authority for REQ; :status for RESP)", op, h)
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
			case t[0].numeric():
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

func appendJSONString(b []byte, s string) []byte {
	enc, _ := json.Marshal(s) // never fails for a string
	return append(b, enc...)
}
