package settings

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// ParseDownwardAPIFile parses a Kubernetes downward-API file of labels or
// annotations (the istio-podinfo volume: /etc/istio/pod/labels,
// /etc/istio/pod/annotations). Each line is key="value" with the value
// quoted as by Go's %q, so multi-line annotation values come as \n escapes.
func ParseDownwardAPIFile(source string, data []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want key=\"value\", got %q", source, n, line)
		}
		uq, err := strconv.Unquote(v)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: value of %q is not a quoted string: %w", source, n, k, err)
		}
		out[k] = uq
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return out, nil
}
