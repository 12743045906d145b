package pgv

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/envoyproxy/protoc-gen-validate/validate"
)

// compileString compiles the pattern. protoc-gen-validate's generator
// turns well_known_regex into a pattern (module/checker.go,
// checkWellKnownRegex) before the templates run, and so does this.
func (rc *ruleCtx) compileString() error {
	r := rc.str
	p := r.Pattern
	if wk := r.GetWellKnownRegex(); wk != validate.KnownRegex_UNKNOWN {
		nonStrict := r.Strict != nil && !*r.Strict
		var s string
		switch {
		case (wk == validate.KnownRegex_HTTP_HEADER_NAME || wk == validate.KnownRegex_HTTP_HEADER_VALUE) && nonStrict:
			s = "^[^\u0000\u000A\u000D]*$"
		case wk == validate.KnownRegex_HTTP_HEADER_NAME:
			s = "^:?[0-9a-zA-Z!#$%&'*+-.^_|~\x60]+$"
		case wk == validate.KnownRegex_HTTP_HEADER_VALUE:
			s = "^[^\u0000-\u0008\u000A-\u001F\u007F]*$"
		default:
			return fmt.Errorf("unsupported well_known_regex %v", wk)
		}
		p = &s
	}
	if r.GetEmail() || r.GetUuid() {
		return errors.New("unsupported string rule (email, uuid)")
	}
	if p != nil {
		re, err := pattern(*p)
		if err != nil {
			return err
		}
		rc.re, rc.pattern = re, *p
	}
	return nil
}

func (rc *ruleCtx) checkString(rep *report, at loc, s string) {
	r := rc.str
	if r.GetIgnoreEmpty() && s == "" {
		return
	}
	if r.Const != nil && s != *r.Const {
		rep.fail(at, "value must equal "+*r.Const)
	}
	if len(r.In) > 0 {
		if !slices.Contains(r.In, s) {
			rep.fail(at, fmt.Sprint("value must be in list ", r.In))
		}
	} else if len(r.NotIn) > 0 && slices.Contains(r.NotIn, s) {
		rep.fail(at, fmt.Sprint("value must not be in list ", r.NotIn))
	}
	runes := func() uint64 { return uint64(utf8.RuneCountInString(s)) }
	switch {
	case r.Len != nil:
		if runes() != r.GetLen() {
			rep.fail(at, fmt.Sprint("value length must be ", r.GetLen(), " runes"))
		}
	case r.MinLen != nil && r.MaxLen != nil && r.GetMinLen() == r.GetMaxLen():
		if runes() != r.GetMinLen() {
			rep.fail(at, fmt.Sprint("value length must be ", r.GetMinLen(), " runes"))
		}
	case r.MinLen != nil && r.MaxLen != nil:
		if l := runes(); l < r.GetMinLen() || l > r.GetMaxLen() {
			rep.fail(at, fmt.Sprint("value length must be between ", r.GetMinLen(), " and ", r.GetMaxLen(), " runes, inclusive"))
		}
	case r.MinLen != nil:
		if runes() < r.GetMinLen() {
			rep.fail(at, fmt.Sprint("value length must be at least ", r.GetMinLen(), " runes"))
		}
	case r.MaxLen != nil:
		if runes() > r.GetMaxLen() {
			rep.fail(at, fmt.Sprint("value length must be at most ", r.GetMaxLen(), " runes"))
		}
	}
	n := uint64(len(s))
	switch {
	case r.LenBytes != nil:
		if n != r.GetLenBytes() {
			rep.fail(at, fmt.Sprint("value length must be ", r.GetLenBytes(), " bytes"))
		}
	case r.MinBytes != nil && r.MaxBytes != nil && r.GetMinBytes() == r.GetMaxBytes():
		if n != r.GetMinBytes() {
			rep.fail(at, fmt.Sprint("value length must be ", r.GetMinBytes(), " bytes"))
		}
	case r.MinBytes != nil && r.MaxBytes != nil:
		if n < r.GetMinBytes() || n > r.GetMaxBytes() {
			rep.fail(at, fmt.Sprint("value length must be between ", r.GetMinBytes(), " and ", r.GetMaxBytes(), " bytes, inclusive"))
		}
	case r.MinBytes != nil:
		if n < r.GetMinBytes() {
			rep.fail(at, fmt.Sprint("value length must be at least ", r.GetMinBytes(), " bytes"))
		}
	case r.MaxBytes != nil:
		if n > r.GetMaxBytes() {
			rep.fail(at, fmt.Sprint("value length must be at most ", r.GetMaxBytes(), " bytes"))
		}
	}
	if r.Prefix != nil && !strings.HasPrefix(s, *r.Prefix) {
		rep.fail(at, fmt.Sprintf("value does not have prefix %q", *r.Prefix))
	}
	if r.Suffix != nil && !strings.HasSuffix(s, *r.Suffix) {
		rep.fail(at, fmt.Sprintf("value does not have suffix %q", *r.Suffix))
	}
	if r.Contains != nil && !strings.Contains(s, *r.Contains) {
		rep.fail(at, fmt.Sprintf("value does not contain substring %q", *r.Contains))
	}
	if r.NotContains != nil && strings.Contains(s, *r.NotContains) {
		rep.fail(at, fmt.Sprintf("value contains substring %q", *r.NotContains))
	}
	switch {
	case r.GetIp():
		if net.ParseIP(s) == nil {
			rep.fail(at, "value must be a valid IP address")
		}
	case r.GetIpv4():
		if ip := net.ParseIP(s); ip == nil || ip.To4() == nil {
			rep.fail(at, "value must be a valid IPv4 address")
		}
	case r.GetIpv6():
		if ip := net.ParseIP(s); ip == nil || ip.To4() != nil {
			rep.fail(at, "value must be a valid IPv6 address")
		}
	case r.GetHostname():
		if err := validateHostname(s); err != nil {
			rep.failCause(at, "value must be a valid hostname", err)
		}
	case r.GetAddress():
		if validateHostname(s) != nil && net.ParseIP(s) == nil {
			rep.fail(at, "value must be a valid hostname, or ip address")
		}
	case r.GetUri():
		if uri, err := url.Parse(s); err != nil {
			rep.failCause(at, "value must be a valid URI", err)
		} else if !uri.IsAbs() {
			rep.fail(at, "value must be absolute")
		}
	case r.GetUriRef():
		if _, err := url.Parse(s); err != nil {
			rep.failCause(at, "value must be a valid URI", err)
		}
	}
	if rc.re != nil && !rc.re.MatchString(s) {
		rep.fail(at, fmt.Sprintf("value does not match regex pattern %q", rc.pattern))
	}
}

// validateHostname is the generated _validateHostname
// (templates/goshared/known.go).
func validateHostname(host string) error {
	s := strings.ToLower(strings.TrimSuffix(host, "."))
	if len(host) > 253 {
		return errors.New("hostname cannot exceed 253 characters")
	}
	for part := range strings.SplitSeq(s, ".") {
		if l := len(part); l == 0 || l > 63 {
			return errors.New("hostname part must be non-empty and cannot exceed 63 characters")
		}
		if part[0] == '-' {
			return errors.New("hostname parts cannot begin with hyphens")
		}
		if part[len(part)-1] == '-' {
			return errors.New("hostname parts cannot end with hyphens")
		}
		for _, r := range part {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
				return fmt.Errorf("hostname parts can only contain alphanumeric characters or hyphens, got %q", string(r))
			}
		}
	}
	return nil
}

func byteStr(x []byte) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range x {
		fmt.Fprintf(&b, `\x%X`, c)
	}
	b.WriteByte('"')
	return b.String()
}

func (rc *ruleCtx) checkBytes(rep *report, at loc, s []byte) {
	r := rc.bytes
	if r.GetIgnoreEmpty() && len(s) == 0 {
		return
	}
	n := uint64(len(s))
	switch {
	case r.Len != nil:
		if n != r.GetLen() {
			rep.fail(at, fmt.Sprint("value length must be ", r.GetLen(), " bytes"))
		}
	case r.MinLen != nil && r.MaxLen != nil && r.GetMinLen() == r.GetMaxLen():
		if n != r.GetMinLen() {
			rep.fail(at, fmt.Sprint("value length must be ", r.GetMinLen(), " bytes"))
		}
	case r.MinLen != nil && r.MaxLen != nil:
		if n < r.GetMinLen() || n > r.GetMaxLen() {
			rep.fail(at, fmt.Sprint("value length must be between ", r.GetMinLen(), " and ", r.GetMaxLen(), " bytes, inclusive"))
		}
	case r.MinLen != nil:
		if n < r.GetMinLen() {
			rep.fail(at, fmt.Sprint("value length must be at least ", r.GetMinLen(), " bytes"))
		}
	case r.MaxLen != nil:
		if n > r.GetMaxLen() {
			rep.fail(at, fmt.Sprint("value length must be at most ", r.GetMaxLen(), " bytes"))
		}
	}
	if r.Prefix != nil && !strings.HasPrefix(string(s), string(r.Prefix)) {
		rep.fail(at, "value does not have prefix "+byteStr(r.Prefix))
	}
	if r.Suffix != nil && !strings.HasSuffix(string(s), string(r.Suffix)) {
		rep.fail(at, "value does not have suffix "+byteStr(r.Suffix))
	}
	if r.Contains != nil && !strings.Contains(string(s), string(r.Contains)) {
		rep.fail(at, "value does not contain "+byteStr(r.Contains))
	}
	has := func(list [][]byte) bool {
		return slices.ContainsFunc(list, func(b []byte) bool { return string(b) == string(s) })
	}
	if len(r.In) > 0 {
		if !has(r.In) {
			rep.fail(at, fmt.Sprint("value must be in list ", r.In))
		}
	} else if len(r.NotIn) > 0 && has(r.NotIn) {
		rep.fail(at, fmt.Sprint("value must not be in list ", r.NotIn))
	}
	if r.Const != nil && string(s) != string(r.Const) {
		rep.fail(at, fmt.Sprintf("value must equal %v", r.Const)) // the bytes as numbers, as the template printed them
	}
	switch {
	case r.GetIp():
		if net.IP(s).To16() == nil {
			rep.fail(at, "value must be a valid IP address")
		}
	case r.GetIpv4():
		if net.IP(s).To4() == nil {
			rep.fail(at, "value must be a valid IPv4 address")
		}
	case r.GetIpv6():
		if ip := net.IP(s); ip.To16() == nil || ip.To4() != nil {
			rep.fail(at, "value must be a valid IPv6 address")
		}
	}
	if rc.re != nil && !rc.re.Match(s) {
		rep.fail(at, fmt.Sprintf("value does not match regex pattern %q", r.GetPattern()))
	}
}
