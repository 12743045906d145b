package accesslog

import (
	"fmt"
	"strconv"
	"time"
)

// timeFormat is a compiled START_TIME(...) argument: Envoy's
// DateFormatter, a strftime format (as absl::FormatTime reads it) plus
// %s (seconds since the epoch) and %f / %1f..%9f (the fraction of the
// second, 9 digits by default). Times are printed in UTC. An empty
// timeFormat is Envoy's default, ISO 8601 with milliseconds.
type timeFormat []timePart

// timePart is a literal or one conversion.
type timePart struct {
	lit    string
	conv   byte // 0: literal
	digits int  // %Nf
}

// startTimeLayout is Envoy's default START_TIME (ISO 8601, UTC, ms).
const startTimeLayout = "2006-01-02T15:04:05.000Z"

// parseTimeFormat compiles a strftime format; a conversion strait-proxy
// does not print as Envoy does is an error naming it.
func parseTimeFormat(f string) (timeFormat, error) {
	var out timeFormat
	lit := []byte{}
	flush := func() {
		if len(lit) > 0 {
			out = append(out, timePart{lit: string(lit)})
			lit = lit[:0]
		}
	}
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			lit = append(lit, f[i])
			continue
		}
		if i+1 >= len(f) {
			return nil, fmt.Errorf("time format %q ends in a lone %%", f)
		}
		i++
		c := f[i]
		switch {
		case c == '%':
			lit = append(lit, '%')
			continue
		case c == 't':
			lit = append(lit, '\t')
			continue
		case c == 'n':
			// Envoy refuses a newline in a time format.
			return nil, fmt.Errorf("time format %q: %%n (a newline) is not allowed", f)
		case c >= '1' && c <= '9' && i+1 < len(f) && f[i+1] == 'f':
			flush()
			out = append(out, timePart{conv: 'f', digits: int(c - '0')})
			i++
			continue
		case c == 'f':
			flush()
			out = append(out, timePart{conv: 'f', digits: 9})
			continue
		}
		switch c {
		case 'Y', 'm', 'd', 'H', 'M', 'S', 'y', 'j', 'e', 'a', 'A', 'b', 'h', 'B', 'p', 'I',
			'T', 'D', 'F', 'R', 'z', 'Z', 's', 'u', 'w', 'C', 'k', 'l':
			flush()
			out = append(out, timePart{conv: c})
		default:
			return nil, fmt.Errorf("time format %q: %%%c is not supported by strait-proxy (supported: %%Y %%m %%d %%H %%M %%S %%y %%j %%e %%a %%A %%b %%B %%p %%I %%T %%D %%F %%R %%z %%Z %%s %%f %%1f..%%9f)", f, c)
		}
	}
	flush()
	return out, nil
}

// append prints t (in UTC) as f describes.
func (f timeFormat) append(dst []byte, t time.Time) []byte {
	t = t.UTC()
	if len(f) == 0 {
		return t.AppendFormat(dst, startTimeLayout)
	}
	for _, p := range f {
		if p.conv == 0 {
			dst = append(dst, p.lit...)
			continue
		}
		dst = appendConv(dst, t, p)
	}
	return dst
}

func appendConv(dst []byte, t time.Time, p timePart) []byte {
	pad := func(n, width int) []byte {
		s := strconv.Itoa(n)
		for i := len(s); i < width; i++ {
			dst = append(dst, '0')
		}
		return append(dst, s...)
	}
	switch p.conv {
	case 'Y':
		return strconv.AppendInt(dst, int64(t.Year()), 10)
	case 'C':
		return pad(t.Year()/100, 2)
	case 'y':
		return pad(t.Year()%100, 2)
	case 'm':
		return pad(int(t.Month()), 2)
	case 'd':
		return pad(t.Day(), 2)
	case 'e':
		if t.Day() < 10 {
			dst = append(dst, ' ')
		}
		return strconv.AppendInt(dst, int64(t.Day()), 10)
	case 'j':
		return pad(t.YearDay(), 3)
	case 'H':
		return pad(t.Hour(), 2)
	case 'k':
		if t.Hour() < 10 {
			dst = append(dst, ' ')
		}
		return strconv.AppendInt(dst, int64(t.Hour()), 10)
	case 'I', 'l':
		h := t.Hour() % 12
		if h == 0 {
			h = 12
		}
		if p.conv == 'l' {
			if h < 10 {
				dst = append(dst, ' ')
			}
			return strconv.AppendInt(dst, int64(h), 10)
		}
		return pad(h, 2)
	case 'M':
		return pad(t.Minute(), 2)
	case 'S':
		return pad(t.Second(), 2)
	case 'p':
		return t.AppendFormat(dst, "PM")
	case 'a':
		return t.AppendFormat(dst, "Mon")
	case 'A':
		return t.AppendFormat(dst, "Monday")
	case 'b', 'h':
		return t.AppendFormat(dst, "Jan")
	case 'B':
		return t.AppendFormat(dst, "January")
	case 'u':
		wd := int(t.Weekday())
		if wd == 0 {
			wd = 7
		}
		return strconv.AppendInt(dst, int64(wd), 10)
	case 'w':
		return strconv.AppendInt(dst, int64(t.Weekday()), 10)
	case 'T':
		return t.AppendFormat(dst, "15:04:05")
	case 'D':
		return t.AppendFormat(dst, "01/02/06")
	case 'F':
		dst = strconv.AppendInt(dst, int64(t.Year()), 10)
		return t.AppendFormat(dst, "-01-02")
	case 'R':
		return t.AppendFormat(dst, "15:04")
	case 'z':
		return append(dst, "+0000"...)
	case 'Z':
		return append(dst, "UTC"...)
	case 's':
		return strconv.AppendInt(dst, t.Unix(), 10)
	case 'f':
		ns := t.Nanosecond()
		for i := 9; i > p.digits; i-- {
			ns /= 10
		}
		return pad(ns, p.digits)
	}
	return dst
}
