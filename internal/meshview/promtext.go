package meshview

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Sample is one sample line of the Prometheus text exposition format
// (https://prometheus.io/docs/instrumenting/exposition_formats/): the
// metric name, its labels and its value. A timestamp, when present, is
// dropped: the scrape's own time is what rates are computed against.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// maxLineBytes bounds one line of a scrape: a proxy's label values are
// short, and a longer line means the peer is not a Prometheus endpoint.
const maxLineBytes = 64 << 10

// ParseText reads the Prometheus text format from r and returns the
// samples whose metric name keep accepts (all when keep is nil). Comment
// and blank lines are skipped; a malformed sample line is an error naming
// its line number.
func ParseText(r io.Reader, keep func(name string) bool) ([]Sample, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLineBytes)
	var out []Sample
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name := line
		if i := strings.IndexAny(line, "{ \t"); i >= 0 {
			name = line[:i]
		}
		if keep != nil && !keep(name) {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}

// parseSample parses `name{l="v",...} value [timestamp]`.
func parseSample(line string) (Sample, error) {
	i := strings.IndexAny(line, "{ \t")
	if i <= 0 {
		return Sample{}, fmt.Errorf("sample %q: want NAME VALUE or NAME{LABELS} VALUE", line)
	}
	s := Sample{Name: line[:i], Labels: map[string]string{}}
	rest := line[i:]
	if rest[0] == '{' {
		var err error
		if rest, err = parseLabels(rest[1:], s.Labels); err != nil {
			return Sample{}, fmt.Errorf("metric %s: %w", s.Name, err)
		}
	}
	fields := strings.Fields(rest)
	if len(fields) < 1 || len(fields) > 2 {
		return Sample{}, fmt.Errorf("metric %s: want a value and an optional timestamp after the labels, got %q", s.Name, rest)
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return Sample{}, fmt.Errorf("metric %s: value %q is not a number", s.Name, fields[0])
	}
	s.Value = v
	return s, nil
}

// parseLabels reads `l="v",...}` into labels and returns what follows the
// closing brace. Values use the format's escapes: \\, \" and \n.
func parseLabels(s string, labels map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, " \t,")
		if s == "" {
			return "", fmt.Errorf("labels: missing '}'")
		}
		if s[0] == '}' {
			return s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return "", fmt.Errorf("labels: want NAME=\"VALUE\" at %q", s)
		}
		name := strings.TrimSpace(s[:eq])
		s = strings.TrimLeft(s[eq+1:], " \t")
		if s == "" || s[0] != '"' {
			return "", fmt.Errorf("label %s: value is not quoted", name)
		}
		var b strings.Builder
		j := 1
		for ; j < len(s) && s[j] != '"'; j++ {
			c := s[j]
			if c == '\\' && j+1 < len(s) {
				j++
				switch s[j] {
				case 'n':
					c = '\n'
				default: // \\ and \" stand for themselves
					c = s[j]
				}
			}
			b.WriteByte(c)
		}
		if j >= len(s) {
			return "", fmt.Errorf("label %s: unterminated value", name)
		}
		labels[name] = b.String()
		s = s[j+1:]
	}
}
