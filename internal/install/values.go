package install

import (
	"fmt"
	"os"
	"strings"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/strvals"
)

// MergeValues reads the -f files in order, then lays the --set and then
// the --set-string expressions over them (Helm's precedence: later wins).
func MergeValues(files, sets, setStrings []string) (map[string]any, error) {
	base := map[string]any{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("values file: %w", err)
		}
		v, err := chartutil.ReadValues(data)
		if err != nil {
			return nil, fmt.Errorf("values file %s: %w", f, err)
		}
		if kind, _ := v["kind"].(string); kind == "IstioOperator" {
			// istioctl's input; the schema would only say that
			// apiVersion, kind and spec are not allowed.
			return nil, fmt.Errorf("values file %s is an IstioOperator, which istioctl reads; straitctl and helm read Helm values: put its spec.values (global, pilot, sidecarInjectorWebhook) at the top of a values file, and its spec.meshConfig under meshConfig", f)
		}
		base = mergeMaps(base, v)
	}
	for _, s := range sets {
		if err := strvals.ParseInto(s, base); err != nil {
			return nil, fmt.Errorf("--set %s: %w%s", s, err, commaHint(s))
		}
	}
	for _, s := range setStrings {
		if err := strvals.ParseIntoString(s, base); err != nil {
			return nil, fmt.Errorf("--set-string %s: %w%s", s, err, commaHint(s))
		}
	}
	return base, nil
}

// commaHint explains Helm's --set syntax when a refused expression has a
// comma: "a=1,b=2" sets two keys, so a list in one value
// (excludeInboundPorts=80,443) reads as a key "443" with no value.
func commaHint(expr string) string {
	if !strings.Contains(expr, ",") {
		return ""
	}
	return ` (a comma separates KEY=VALUE pairs; write a comma inside a value as \, and quote it for the shell: --set 'global.proxy.excludeInboundPorts=80\,443')`
}

// mergeMaps lays b over a: maps merge key by key, anything else in b
// replaces a's.
func mergeMaps(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if bm, ok := v.(map[string]any); ok {
			if am, ok := out[k].(map[string]any); ok {
				out[k] = mergeMaps(am, bm)
				continue
			}
		}
		out[k] = v
	}
	return out
}
