package inject

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/template"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TemplateData is what a sidecar template sees. Field names are Istio's, so
// templates written for Istio's injector read the same data.
type TemplateData struct {
	// TypeMeta and DeploymentMeta describe the workload that owns the pod
	// (a Deployment for its pods, the pod itself when it has no owner).
	TypeMeta       metav1.TypeMeta
	DeploymentMeta metav1.ObjectMeta
	// ObjectMeta and Spec are the pod as submitted.
	ObjectMeta metav1.ObjectMeta
	Spec       corev1.PodSpec
	// ProxyConfig is the built-in default < mesh defaultConfig <
	// proxy.istio.io/config annotation.
	ProxyConfig *meshv1alpha1.ProxyConfig
	// MeshConfig is the mesh config as written; unset fields are zero.
	MeshConfig *meshv1alpha1.MeshConfig
	Values     map[string]any
	// Revision is the control plane's revision ("" is the default one).
	Revision string
	// ProxyImage is sidecar.istio.io/proxyImage, else the values' image.
	ProxyImage string
	// EstimatedConcurrency is the proxy's --concurrency (injection step 3).
	EstimatedConcurrency int
	// ProxyResources are the proxy's requests and limits: the
	// sidecar.istio.io/proxy{CPU,Memory}[Limit] annotations when any is
	// set, else the values' global.proxy.resources.
	ProxyResources corev1.ResourceRequirements
	// NativeSidecars says istio-proxy will run as a native sidecar (an
	// init container with restartPolicy Always).
	NativeSidecars bool
}

func parseTemplate(name, text string) (*template.Template, error) {
	return template.New(name).Funcs(templateFuncs()).Parse(text)
}

// render executes t and parses its output as a (partial) pod.
func render(t *template.Template, data *TemplateData) (*corev1.Pod, error) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("render template %q: %w", t.Name(), err)
	}
	pod := &corev1.Pod{}
	if err := yaml.Unmarshal(buf.Bytes(), pod); err != nil {
		return nil, fmt.Errorf("template %q does not render a pod: %w\n%s", t.Name(), err, buf.String())
	}
	return pod, nil
}

func templateFuncs() template.FuncMap {
	return template.FuncMap{
		"annotation":         annotation,
		"isset":              isset,
		"excludeInboundPort": excludeInboundPort,
		"valueOrDefault":     valueOrDefault,
		"default":            defaultValue,
		"quote":              quote,
		"toJSON":             toJSON,
		"toJson":             toJSON,
		"structToJSON":       toJSON,
		"fromJSON":           fromJSON,
		"protoToJSON":        protoToJSON,
		"toYaml":             toYAML,
		"indent":             indent,
		"nindent":            func(n int, s string) string { return "\n" + indent(n, s) },
		"toLower":            strings.ToLower,
		"toUpper":            strings.ToUpper,
		"contains":           func(substr, s string) bool { return strings.Contains(s, substr) },
		"hasPrefix":          func(prefix, s string) bool { return strings.HasPrefix(s, prefix) },
		"trimSpace":          strings.TrimSpace,
		"split":              func(sep, s string) []string { return strings.Split(s, sep) },
		"join":               join,
		"list":               func(v ...any) []any { return v },
		"dict":               dict,
		"containerPorts":     containerPorts,
		"appContainers":      appContainers,
		"userVolumes":        userVolumes,
		"userVolumeMounts":   userVolumeMounts,
	}
}

// annotation is the pod's annotation name if set, else def.
func annotation(meta metav1.ObjectMeta, name string, def any) string {
	if v, ok := meta.Annotations[name]; ok {
		return v
	}
	if def == nil {
		return ""
	}
	return fmt.Sprint(def)
}

func isset(m map[string]string, key string) bool {
	_, ok := m[key]
	return ok
}

// excludeInboundPort adds port to the comma-separated list excluded unless
// it is already there or is 0/empty (no status port).
func excludeInboundPort(port any, excluded any) string {
	p := ""
	if port != nil {
		p = strings.TrimSpace(fmt.Sprint(port))
	}
	list := ""
	if excluded != nil {
		list = strings.TrimSpace(fmt.Sprint(excluded))
	}
	if p == "" || p == "0" {
		return list
	}
	var out []string
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	if !slices.Contains(out, p) {
		out = append(out, p)
	}
	return strings.Join(out, ",")
}

// empty is sprig's notion: nil, zero numbers, false, "" and empty
// collections are empty.
func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case int:
		return x == 0
	case int32:
		return x == 0
	case int64:
		return x == 0
	case uint32:
		return x == 0
	case float64:
		return x == 0
	case json.Number:
		return x == "" || x == "0"
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	case fmt.Stringer:
		return x.String() == ""
	}
	return false
}

// valueOrDefault is v unless it is empty, else def.
func valueOrDefault(v any, def any) any {
	if empty(v) {
		return def
	}
	return v
}

// defaultValue is sprig's default, for pipelines: `x | default "15001"`.
func defaultValue(def any, v ...any) any {
	if len(v) == 0 || empty(v[0]) {
		return def
	}
	return v[0]
}

func quote(v ...any) string {
	out := make([]string, 0, len(v))
	for _, x := range v {
		if x == nil {
			x = ""
		}
		out = append(out, fmt.Sprintf("%q", fmt.Sprint(x)))
	}
	return strings.Join(out, " ")
}

func toJSON(v any) string {
	if m, ok := v.(proto.Message); ok {
		return protoToJSON(m)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "null"
	}
	return string(b)
}

func fromJSON(s string) any {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil
	}
	return v
}

// protoToJSON is compact JSON with Istio's lowerCamel field names; a nil
// message is {}.
func protoToJSON(m proto.Message) string {
	if m == nil || !m.ProtoReflect().IsValid() {
		return "{}"
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		return "{}"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return "{}"
	}
	return buf.String()
}

func toYAML(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

func indent(n int, s string) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}

func join(sep string, v any) string {
	switch x := v.(type) {
	case []string:
		return strings.Join(x, sep)
	case []any:
		s := make([]string, len(x))
		for i, e := range x {
			s[i] = fmt.Sprint(e)
		}
		return strings.Join(s, sep)
	}
	return fmt.Sprint(v)
}

func dict(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[fmt.Sprint(kv[i])] = kv[i+1]
	}
	return m
}

// containerPorts lists the ports the app containers declare.
func containerPorts(spec corev1.PodSpec) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, c := range spec.Containers {
		if c.Name == ProxyContainerName {
			continue
		}
		out = append(out, c.Ports...)
	}
	return out
}

// appContainers is the comma-separated names of the app containers.
func appContainers(spec corev1.PodSpec) string {
	var names []string
	for _, c := range spec.Containers {
		if c.Name != ProxyContainerName {
			names = append(names, c.Name)
		}
	}
	return strings.Join(names, ",")
}

// userVolumes reads sidecar.istio.io/userVolume: a JSON object from volume
// name to volume source, or a JSON array of volumes. Invalid JSON was
// refused by validation; here it yields nothing.
func userVolumes(meta metav1.ObjectMeta) []corev1.Volume {
	v, _ := parseUserVolumes(meta.Annotations[annoUserVolume])
	return v
}

func userVolumeMounts(meta metav1.ObjectMeta) []corev1.VolumeMount {
	v, _ := parseUserVolumeMounts(meta.Annotations[annoUserVolumeMount])
	return v
}

func parseUserVolumes(s string) ([]corev1.Volume, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var list []corev1.Volume
	if err := json.Unmarshal([]byte(s), &list); err == nil {
		for _, v := range list {
			if v.Name == "" {
				return nil, fmt.Errorf("a volume has no name")
			}
		}
		return list, nil
	}
	var byName map[string]corev1.Volume
	if err := json.Unmarshal([]byte(s), &byName); err != nil {
		return nil, err
	}
	for _, name := range sortedKeys(byName) {
		v := byName[name]
		v.Name = name
		list = append(list, v)
	}
	return list, nil
}

func parseUserVolumeMounts(s string) ([]corev1.VolumeMount, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var list []corev1.VolumeMount
	if err := json.Unmarshal([]byte(s), &list); err == nil {
		for _, m := range list {
			if m.Name == "" || m.MountPath == "" {
				return nil, fmt.Errorf("a volume mount needs name and mountPath")
			}
		}
		return list, nil
	}
	var byName map[string]corev1.VolumeMount
	if err := json.Unmarshal([]byte(s), &byName); err != nil {
		return nil, err
	}
	for _, name := range sortedKeys(byName) {
		m := byName[name]
		m.Name = name
		if m.MountPath == "" {
			return nil, fmt.Errorf("volume mount %q has no mountPath", name)
		}
		list = append(list, m)
	}
	return list, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
