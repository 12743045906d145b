package pgv

import (
	"strings"
	"testing"

	"github.com/envoyproxy/protoc-gen-validate/validate"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

func u64(v uint64) *uint64 { return &v }

func TestStringBoundaries(t *testing.T) {
	const pre = "invalid M.F: "
	type tc struct {
		r    *validate.StringRules
		v    string
		want []string
	}
	cases := []tc{
		{&validate.StringRules{Len: u64(2)}, "éa", nil},
		{&validate.StringRules{Len: u64(2)}, "a", []string{"value length must be 2 runes"}},
		{&validate.StringRules{Len: u64(2)}, "abc", []string{"value length must be 2 runes"}},
		{&validate.StringRules{MinLen: u64(2), MaxLen: u64(2)}, "éa", nil},
		{&validate.StringRules{MinLen: u64(2), MaxLen: u64(2)}, "a", []string{"value length must be 2 runes"}},
		{&validate.StringRules{MinLen: u64(2), MaxLen: u64(2)}, "abc", []string{"value length must be 2 runes"}},
		{&validate.StringRules{MinLen: u64(2), MaxLen: u64(3)}, "a", []string{"value length must be between 2 and 3 runes, inclusive"}},
		{&validate.StringRules{MinLen: u64(2), MaxLen: u64(3)}, "ab", nil},
		{&validate.StringRules{MinLen: u64(2), MaxLen: u64(3)}, "abc", nil},
		{&validate.StringRules{MinLen: u64(2), MaxLen: u64(3)}, "abcd", []string{"value length must be between 2 and 3 runes, inclusive"}},
		{&validate.StringRules{MinLen: u64(2)}, "é", []string{"value length must be at least 2 runes"}},
		{&validate.StringRules{MinLen: u64(2)}, "éé", nil},
		{&validate.StringRules{MaxLen: u64(2)}, "ééé", []string{"value length must be at most 2 runes"}},
		{&validate.StringRules{MaxLen: u64(2)}, "éé", nil},
		{&validate.StringRules{LenBytes: u64(2)}, "é", nil},
		{&validate.StringRules{LenBytes: u64(2)}, "a", []string{"value length must be 2 bytes"}},
		{&validate.StringRules{LenBytes: u64(2)}, "abc", []string{"value length must be 2 bytes"}},
		{&validate.StringRules{MinBytes: u64(2), MaxBytes: u64(2)}, "é", nil},
		{&validate.StringRules{MinBytes: u64(2), MaxBytes: u64(2)}, "a", []string{"value length must be 2 bytes"}},
		{&validate.StringRules{MinBytes: u64(2), MaxBytes: u64(2)}, "abc", []string{"value length must be 2 bytes"}},
		{&validate.StringRules{MinBytes: u64(2), MaxBytes: u64(3)}, "a", []string{"value length must be between 2 and 3 bytes, inclusive"}},
		{&validate.StringRules{MinBytes: u64(2), MaxBytes: u64(3)}, "é", nil},
		{&validate.StringRules{MinBytes: u64(2), MaxBytes: u64(3)}, "abc", nil},
		{&validate.StringRules{MinBytes: u64(2), MaxBytes: u64(3)}, "éé", []string{"value length must be between 2 and 3 bytes, inclusive"}},
		{&validate.StringRules{MinBytes: u64(2)}, "a", []string{"value length must be at least 2 bytes"}},
		{&validate.StringRules{MinBytes: u64(2)}, "é", nil},
		{&validate.StringRules{MaxBytes: u64(2)}, "é", nil},
		{&validate.StringRules{MaxBytes: u64(2)}, "éa", []string{"value length must be at most 2 bytes"}},
		{&validate.StringRules{Const: proto.String("x")}, "x", nil},
		{&validate.StringRules{Const: proto.String("x")}, "y", []string{"value must equal x"}},
		{&validate.StringRules{In: []string{"a", "b"}}, "b", nil},
		{&validate.StringRules{In: []string{"a", "b"}}, "c", []string{"value must be in list [a b]"}},
		{&validate.StringRules{NotIn: []string{"a", "b"}}, "b", []string{"value must not be in list [a b]"}},
		{&validate.StringRules{NotIn: []string{"a", "b"}}, "c", nil},
		{&validate.StringRules{}, "c", nil},
		{&validate.StringRules{Prefix: proto.String("ab")}, "abc", nil},
		{&validate.StringRules{Prefix: proto.String("ab")}, "cab", []string{`value does not have prefix "ab"`}},
		{&validate.StringRules{Suffix: proto.String("ab")}, "cab", nil},
		{&validate.StringRules{Suffix: proto.String("ab")}, "abc", []string{`value does not have suffix "ab"`}},
		{&validate.StringRules{Contains: proto.String("ab")}, "cabc", nil},
		{&validate.StringRules{Contains: proto.String("ab")}, "ac", []string{`value does not contain substring "ab"`}},
		{&validate.StringRules{NotContains: proto.String("ab")}, "ac", nil},
		{&validate.StringRules{NotContains: proto.String("ab")}, "cabc", []string{`value contains substring "ab"`}},
		{&validate.StringRules{MinLen: u64(1), IgnoreEmpty: proto.Bool(true)}, "", nil},
		{&validate.StringRules{MinLen: u64(3), IgnoreEmpty: proto.Bool(true)}, "a", []string{"value length must be at least 3 runes"}},
		{&validate.StringRules{MinLen: u64(1)}, "", []string{"value length must be at least 1 runes"}},
		{&validate.StringRules{Pattern: proto.String("^a+$")}, "aa", nil},
		{&validate.StringRules{Pattern: proto.String("^a+$")}, "ab", []string{`value does not match regex pattern "^a+$"`}},
		// Several rules fail together, in the template's order.
		{&validate.StringRules{Const: proto.String("abc"), In: []string{"x"}, MinLen: u64(5), MinBytes: u64(5), Prefix: proto.String("b"), Pattern: proto.String("^b")}, "a",
			[]string{"value must equal abc", "value must be in list [x]", "value length must be at least 5 runes", "value length must be at least 5 bytes", `value does not have prefix "b"`, `value does not match regex pattern "^b"`}},
	}
	known := []struct {
		r    *validate.StringRules
		v    string
		want string
	}{
		{&validate.StringRules{WellKnown: &validate.StringRules_Ip{Ip: true}}, "10.0.0.1", ""},
		{&validate.StringRules{WellKnown: &validate.StringRules_Ip{Ip: true}}, "::1", ""},
		{&validate.StringRules{WellKnown: &validate.StringRules_Ip{Ip: true}}, "x", "value must be a valid IP address"},
		{&validate.StringRules{WellKnown: &validate.StringRules_Ipv4{Ipv4: true}}, "10.0.0.1", ""},
		{&validate.StringRules{WellKnown: &validate.StringRules_Ipv4{Ipv4: true}}, "::1", "value must be a valid IPv4 address"},
		{&validate.StringRules{WellKnown: &validate.StringRules_Ipv4{Ipv4: true}}, "x", "value must be a valid IPv4 address"},
		{&validate.StringRules{WellKnown: &validate.StringRules_Ipv6{Ipv6: true}}, "::1", ""},
		{&validate.StringRules{WellKnown: &validate.StringRules_Ipv6{Ipv6: true}}, "10.0.0.1", "value must be a valid IPv6 address"},
		{&validate.StringRules{WellKnown: &validate.StringRules_Ipv6{Ipv6: true}}, "x", "value must be a valid IPv6 address"},
		{&validate.StringRules{WellKnown: &validate.StringRules_Hostname{Hostname: true}}, "a-b.example.com.", ""},
		{&validate.StringRules{WellKnown: &validate.StringRules_Hostname{Hostname: true}}, "a_b", `value must be a valid hostname | caused by: hostname parts can only contain alphanumeric characters or hyphens, got "_"`},
		{&validate.StringRules{WellKnown: &validate.StringRules_Address{Address: true}}, "a.example", ""},
		{&validate.StringRules{WellKnown: &validate.StringRules_Address{Address: true}}, "::1", ""},
		{&validate.StringRules{WellKnown: &validate.StringRules_Address{Address: true}}, "a_b", "value must be a valid hostname, or ip address"},
		{&validate.StringRules{WellKnown: &validate.StringRules_Uri{Uri: true}}, "http://x/y", ""},
		{&validate.StringRules{WellKnown: &validate.StringRules_Uri{Uri: true}}, "/y", "value must be absolute"},
		{&validate.StringRules{WellKnown: &validate.StringRules_Uri{Uri: true}}, "%zz", `value must be a valid URI | caused by: parse "%zz": invalid URL escape "%zz"`},
		{&validate.StringRules{WellKnown: &validate.StringRules_UriRef{UriRef: true}}, "/y", ""},
		{&validate.StringRules{WellKnown: &validate.StringRules_UriRef{UriRef: true}}, "%zz", `value must be a valid URI | caused by: parse "%zz": invalid URL escape "%zz"`},
		{&validate.StringRules{WellKnown: &validate.StringRules_WellKnownRegex{WellKnownRegex: validate.KnownRegex_HTTP_HEADER_NAME}}, ":path", ""},
		{&validate.StringRules{WellKnown: &validate.StringRules_WellKnownRegex{WellKnownRegex: validate.KnownRegex_HTTP_HEADER_NAME}}, "a b", `value does not match regex pattern "^:?[0-9a-zA-Z!#$%&'*+-.^_|~` + "`" + `]+$"`},
		{&validate.StringRules{WellKnown: &validate.StringRules_WellKnownRegex{WellKnownRegex: validate.KnownRegex_HTTP_HEADER_NAME}, Strict: proto.Bool(false)}, "a b", ""},
		{&validate.StringRules{WellKnown: &validate.StringRules_WellKnownRegex{WellKnownRegex: validate.KnownRegex_HTTP_HEADER_NAME}, Strict: proto.Bool(true)}, "a b", `value does not match regex pattern "^:?[0-9a-zA-Z!#$%&'*+-.^_|~` + "`" + `]+$"`},
		{&validate.StringRules{WellKnown: &validate.StringRules_WellKnownRegex{WellKnownRegex: validate.KnownRegex_HTTP_HEADER_VALUE}}, "a\tb", ""},
		{&validate.StringRules{WellKnown: &validate.StringRules_WellKnownRegex{WellKnownRegex: validate.KnownRegex_HTTP_HEADER_VALUE}}, "a\x01b", `value does not match regex pattern "^[^\x00-\b\n-\x1f\x7f]*$"`},
		{&validate.StringRules{WellKnown: &validate.StringRules_WellKnownRegex{WellKnownRegex: validate.KnownRegex_HTTP_HEADER_VALUE}, Strict: proto.Bool(false)}, "a\x01b", ""},
		{&validate.StringRules{WellKnown: &validate.StringRules_WellKnownRegex{WellKnownRegex: validate.KnownRegex_HTTP_HEADER_VALUE}, Strict: proto.Bool(false)}, "a\nb", `value does not match regex pattern "^[^\x00\n\r]*$"`},
	}
	for _, k := range known {
		var want []string
		if k.want != "" {
			want = []string{k.want}
		}
		cases = append(cases, tc{k.r, k.v, want})
	}
	for _, c := range cases {
		got := apply(t, fieldType{kind: protoreflect.StringKind}, &validate.FieldRules{Type: &validate.FieldRules_String_{String_: c.r}}, nil, protoreflect.ValueOfString(c.v), true)
		want := make([]string, len(c.want))
		for i, w := range c.want {
			want[i] = pre + w
		}
		expect(t, c.r.String()+" "+c.v, got, want...)
	}
}

func TestHostname(t *testing.T) {
	label := strings.Repeat("a", 63)
	long := strings.Repeat(label+".", 4)[:253] // 253 characters, labels of 63 and a last of 61
	for _, c := range []struct {
		host string
		ok   bool
	}{
		{"a", true}, {"z", true}, {"0", true}, {"9", true}, {"a-0.z9.", true}, {"A.Z", true},
		{"`", false}, {"{", false}, {"/", false}, {":", false}, {"a_b", false},
		{"-a", false}, {"a-", false}, {"a..b", false}, {"", false}, {".", false},
		{label, true}, {label + "a", false},
		{long, true}, {long[:252] + ".", true}, {long + ".", false}, {long + "a", false},
	} {
		if err := validateHostname(c.host); (err == nil) != c.ok {
			t.Errorf("%q: %v, want ok %v", c.host, err, c.ok)
		}
	}
}

func TestBytesBoundaries(t *testing.T) {
	const pre = "invalid M.F: "
	type tc struct {
		r    *validate.BytesRules
		v    string
		want []string
	}
	cases := []tc{
		{&validate.BytesRules{Len: u64(2)}, "ab", nil},
		{&validate.BytesRules{Len: u64(2)}, "a", []string{"value length must be 2 bytes"}},
		{&validate.BytesRules{Len: u64(2)}, "abc", []string{"value length must be 2 bytes"}},
		{&validate.BytesRules{MinLen: u64(2), MaxLen: u64(2)}, "ab", nil},
		{&validate.BytesRules{MinLen: u64(2), MaxLen: u64(2)}, "a", []string{"value length must be 2 bytes"}},
		{&validate.BytesRules{MinLen: u64(2), MaxLen: u64(2)}, "abc", []string{"value length must be 2 bytes"}},
		{&validate.BytesRules{MinLen: u64(2), MaxLen: u64(3)}, "a", []string{"value length must be between 2 and 3 bytes, inclusive"}},
		{&validate.BytesRules{MinLen: u64(2), MaxLen: u64(3)}, "ab", nil},
		{&validate.BytesRules{MinLen: u64(2), MaxLen: u64(3)}, "abc", nil},
		{&validate.BytesRules{MinLen: u64(2), MaxLen: u64(3)}, "abcd", []string{"value length must be between 2 and 3 bytes, inclusive"}},
		{&validate.BytesRules{MinLen: u64(2)}, "a", []string{"value length must be at least 2 bytes"}},
		{&validate.BytesRules{MinLen: u64(2)}, "ab", nil},
		{&validate.BytesRules{MaxLen: u64(2)}, "ab", nil},
		{&validate.BytesRules{MaxLen: u64(2)}, "abc", []string{"value length must be at most 2 bytes"}},
		{&validate.BytesRules{Prefix: []byte("ab")}, "abc", nil},
		{&validate.BytesRules{Prefix: []byte("ab")}, "cab", []string{`value does not have prefix "\x61\x62"`}},
		{&validate.BytesRules{Suffix: []byte("ab")}, "cab", nil},
		{&validate.BytesRules{Suffix: []byte("ab")}, "abc", []string{`value does not have suffix "\x61\x62"`}},
		{&validate.BytesRules{Contains: []byte("ab")}, "cabc", nil},
		{&validate.BytesRules{Contains: []byte("ab")}, "ac", []string{`value does not contain "\x61\x62"`}},
		{&validate.BytesRules{In: [][]byte{[]byte("a"), []byte("b")}}, "b", nil},
		{&validate.BytesRules{In: [][]byte{[]byte("a"), []byte("b")}}, "c", []string{"value must be in list [[97] [98]]"}},
		{&validate.BytesRules{NotIn: [][]byte{[]byte("a"), []byte("b")}}, "b", []string{"value must not be in list [[97] [98]]"}},
		{&validate.BytesRules{NotIn: [][]byte{[]byte("a"), []byte("b")}}, "c", nil},
		{&validate.BytesRules{}, "c", nil},
		{&validate.BytesRules{Const: []byte("ab")}, "ab", nil},
		{&validate.BytesRules{Const: []byte("ab")}, "a", []string{"value must equal [97 98]"}},
		{&validate.BytesRules{MinLen: u64(1), IgnoreEmpty: proto.Bool(true)}, "", nil},
		{&validate.BytesRules{MinLen: u64(3), IgnoreEmpty: proto.Bool(true)}, "a", []string{"value length must be at least 3 bytes"}},
		{&validate.BytesRules{MinLen: u64(1)}, "", []string{"value length must be at least 1 bytes"}},
		{&validate.BytesRules{Pattern: proto.String("^a+$")}, "aa", nil},
		{&validate.BytesRules{Pattern: proto.String("^a+$")}, "ab", []string{`value does not match regex pattern "^a+$"`}},
		{&validate.BytesRules{WellKnown: &validate.BytesRules_Ip{Ip: true}}, "\x0a\x00\x00\x01", nil},
		{&validate.BytesRules{WellKnown: &validate.BytesRules_Ip{Ip: true}}, strings.Repeat("\x01", 16), nil},
		{&validate.BytesRules{WellKnown: &validate.BytesRules_Ip{Ip: true}}, "abc", []string{"value must be a valid IP address"}},
		{&validate.BytesRules{WellKnown: &validate.BytesRules_Ipv4{Ipv4: true}}, "\x0a\x00\x00\x01", nil},
		{&validate.BytesRules{WellKnown: &validate.BytesRules_Ipv4{Ipv4: true}}, strings.Repeat("\x01", 16), []string{"value must be a valid IPv4 address"}},
		{&validate.BytesRules{WellKnown: &validate.BytesRules_Ipv6{Ipv6: true}}, strings.Repeat("\x01", 16), nil},
		{&validate.BytesRules{WellKnown: &validate.BytesRules_Ipv6{Ipv6: true}}, "\x0a\x00\x00\x01", []string{"value must be a valid IPv6 address"}},
		{&validate.BytesRules{WellKnown: &validate.BytesRules_Ipv6{Ipv6: true}}, "abc", []string{"value must be a valid IPv6 address"}},
	}
	for _, c := range cases {
		got := apply(t, fieldType{kind: protoreflect.BytesKind}, &validate.FieldRules{Type: &validate.FieldRules_Bytes{Bytes: c.r}}, nil, protoreflect.ValueOfBytes([]byte(c.v)), true)
		want := make([]string, len(c.want))
		for i, w := range c.want {
			want[i] = pre + w
		}
		expect(t, c.r.String()+" "+c.v, got, want...)
	}
}

func TestGoCamelCase(t *testing.T) {
	// protoc-gen-go's names (internal/strs.GoCamelCase).
	for in, want := range map[string]string{
		"foo_bar": "FooBar", "_foo": "XFoo", "a._b": "A_XB", "a.b": "AB", "a.B": "A_B", "a.": "A_", "a_": "A_",
		"foo1bar": "Foo1Bar", "x_0a": "X_0A", "x_9a": "X_9A", "x_/a": "X_/a", "x_:a": "X_:a",
		"a_a": "AA", "z_z": "ZZ", "A.b": "AB", "A_b": "AB", "a_B": "A_B", "fooBar_baz": "FooBarBaz", "`a": "`a", "{a": "{a", "abC": "AbC", "ab_c": "AbC",
	} {
		if got := goCamelCase(in); got != want {
			t.Errorf("goCamelCase(%q) = %q, want %q", in, got, want)
		}
	}
}
