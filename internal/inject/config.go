package inject

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"

	"google.golang.org/protobuf/encoding/protojson"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Policy says whether pods that do not ask either way get a sidecar.
type Policy string

const (
	// PolicyEnabled injects every pod that reaches the injector (the
	// webhook's namespace selector, or kube-inject) unless it opts out.
	PolicyEnabled Policy = "enabled"
	// PolicyDisabled injects only pods that ask with sidecar.istio.io/inject.
	PolicyDisabled Policy = "disabled"
)

// SidecarTemplateName is the template every default configuration renders.
const SidecarTemplateName = "sidecar"

// Config is the injector configuration: the `config` key of the
// istio-sidecar-injector ConfigMap, or the file `config` in the injector's
// directory. Field names follow Istio's so existing files load.
type Config struct {
	// Policy is "enabled" or "disabled" (default enabled).
	Policy Policy `json:"policy,omitempty"`
	// DefaultTemplates are rendered, in order, for every injected pod.
	// Empty means ["sidecar"].
	DefaultTemplates []string `json:"defaultTemplates,omitempty"`
	// Templates maps a name to Go text/template source that renders a
	// partial pod (YAML).
	Templates map[string]string `json:"templates,omitempty"`
	// Template is the older single-template form; it becomes
	// Templates["sidecar"] when that is not set.
	Template string `json:"template,omitempty"`
	// NeverInjectSelector: pods whose labels match any of these are not
	// injected unless they ask explicitly.
	NeverInjectSelector []metav1.LabelSelector `json:"neverInjectSelector,omitempty"`
	// AlwaysInjectSelector: pods whose labels match any of these are
	// injected unless they opt out explicitly.
	AlwaysInjectSelector []metav1.LabelSelector `json:"alwaysInjectSelector,omitempty"`
	// InjectedAnnotations are added to every injected pod.
	InjectedAnnotations map[string]string `json:"injectedAnnotations,omitempty"`
}

// Values are the Helm-style values the templates read (.Values.global.proxy…).
// Numbers are json.Number, so a port renders as "15020", never "15020.0".
type Values map[string]any

// Get walks a dotted path ("global.proxy.statusPort"); missing keys give nil.
func (v Values) Get(path string) any {
	var cur any = map[string]any(v)
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

// String is Get formatted as text; nil is "".
func (v Values) String(path string) string {
	x := v.Get(path)
	if x == nil {
		return ""
	}
	return fmt.Sprint(x)
}

// Bool is Get read as a boolean: true, "true" and non-zero numbers.
func (v Values) Bool(path string) bool {
	switch x := v.Get(path).(type) {
	case bool:
		return x
	case string:
		return strings.EqualFold(x, "true")
	case json.Number:
		f, err := x.Float64()
		return err == nil && f != 0
	}
	return false
}

// Settings is one consistent snapshot of everything injection reads. It is
// immutable once built: the Injector swaps whole Settings, never edits one.
type Settings struct {
	Config *Config
	Values Values
	// Mesh is the mesh config as the user wrote it (not filled with
	// defaults): its defaultConfig is what PROXY_CONFIG carries to the
	// agent, which layers it over its own defaults.
	Mesh *meshv1alpha1.MeshConfig

	templates map[string]*template.Template
}

//go:embed data/sidecar.yaml.tmpl
var defaultSidecarTemplate string

//go:embed data/values.yaml
var defaultValuesYAML []byte

// DefaultConfig is the configuration shipped in the repository: policy
// enabled, the one sidecar template.
func DefaultConfig() *Config {
	return &Config{
		Policy:           PolicyEnabled,
		DefaultTemplates: []string{SidecarTemplateName},
		Templates:        map[string]string{SidecarTemplateName: defaultSidecarTemplate},
	}
}

// DefaultValues are the values shipped in the repository.
func DefaultValues() Values {
	v, err := ParseValues(defaultValuesYAML)
	if err != nil {
		panic("inject: shipped values do not parse: " + err.Error())
	}
	return v
}

// DefaultSettings combines DefaultConfig, DefaultValues and an empty mesh
// config.
func DefaultSettings() *Settings {
	s, err := NewSettings(DefaultConfig(), DefaultValues(), nil)
	if err != nil {
		panic("inject: shipped template does not parse: " + err.Error())
	}
	return s
}

// NewSettings validates cfg, parses its templates and returns a snapshot.
// A nil mesh is an empty MeshConfig; nil values are DefaultValues.
func NewSettings(cfg *Config, values Values, mesh *meshv1alpha1.MeshConfig) (*Settings, error) {
	if cfg == nil {
		cfg = DefaultConfig()
	}
	cfg = cfg.normalized()
	// Values layer over the shipped ones, so a values file need only say
	// what it changes and templates never meet a missing key.
	values = mergeValues(DefaultValues(), values)
	if mesh == nil {
		mesh = &meshv1alpha1.MeshConfig{}
	}
	switch cfg.Policy {
	case PolicyEnabled, PolicyDisabled:
	default:
		return nil, fmt.Errorf("injector config: policy %q is not \"enabled\" or \"disabled\"", cfg.Policy)
	}
	for _, sel := range append(slices.Clone(cfg.NeverInjectSelector), cfg.AlwaysInjectSelector...) {
		if _, err := metav1.LabelSelectorAsSelector(&sel); err != nil {
			return nil, fmt.Errorf("injector config: label selector: %w", err)
		}
	}
	s := &Settings{Config: cfg, Values: values, Mesh: mesh, templates: map[string]*template.Template{}}
	for _, name := range slices.Sorted(maps.Keys(cfg.Templates)) {
		t, err := parseTemplate(name, cfg.Templates[name])
		if err != nil {
			return nil, fmt.Errorf("injector config: template %q: %w", name, err)
		}
		s.templates[name] = t
	}
	for _, name := range cfg.DefaultTemplates {
		if s.templates[name] == nil {
			return nil, fmt.Errorf("injector config: default template %q is not defined in templates", name)
		}
	}
	return s, nil
}

func (c *Config) normalized() *Config {
	out := *c
	out.Templates = maps.Clone(c.Templates)
	if out.Templates == nil {
		out.Templates = map[string]string{}
	}
	if c.Template != "" && out.Templates[SidecarTemplateName] == "" {
		out.Templates[SidecarTemplateName] = c.Template
	}
	if len(out.Templates) == 0 {
		// A config that only sets policy or selectors keeps the shipped
		// template.
		out.Templates[SidecarTemplateName] = defaultSidecarTemplate
	}
	if out.Policy == "" {
		out.Policy = PolicyEnabled
	}
	if len(out.DefaultTemplates) == 0 {
		out.DefaultTemplates = []string{SidecarTemplateName}
	}
	return &out
}

// ParseConfig reads the injector configuration (YAML or JSON). A ConfigMap
// manifest is accepted too: its data.config is read.
func ParseConfig(data []byte) (*Config, error) {
	if cm, ok := configMapData(data); ok {
		data = []byte(cm["config"])
	}
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("injector config: %w", err)
	}
	return &c, nil
}

// ParseValues reads values (YAML or JSON). A ConfigMap manifest is accepted
// too: its data.values is read.
func ParseValues(data []byte) (Values, error) {
	if cm, ok := configMapData(data); ok {
		data = []byte(cm["values"])
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("injector values: %w", err)
	}
	v := Values{}
	if len(bytes.TrimSpace(js)) == 0 || string(bytes.TrimSpace(js)) == "null" {
		return v, nil
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("injector values: not a map: %w", err)
	}
	return v, nil
}

// ParseMeshConfig reads a MeshConfig (YAML or JSON). A ConfigMap manifest
// (Istio's `istio` ConfigMap) is accepted too: its data.mesh is read.
func ParseMeshConfig(data []byte) (*meshv1alpha1.MeshConfig, error) {
	if cm, ok := configMapData(data); ok {
		data = []byte(cm["mesh"])
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("mesh config: %w", err)
	}
	m := &meshv1alpha1.MeshConfig{}
	if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
		return m, nil
	}
	if err := protojson.Unmarshal(js, m); err != nil {
		return nil, fmt.Errorf("mesh config: %w", err)
	}
	return m, nil
}

// configMapData returns data of a v1 ConfigMap manifest.
func configMapData(raw []byte) (map[string]string, bool) {
	var cm struct {
		Kind string            `json:"kind"`
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(raw, &cm); err != nil || cm.Kind != "ConfigMap" {
		return nil, false
	}
	return cm.Data, true
}

// SettingsFromConfigMap builds Settings from the data of the
// istio-sidecar-injector ConfigMap (keys "config" and "values"); a missing
// key keeps the shipped default. It is what a ConfigMap informer's handler
// calls before Injector.Update.
func SettingsFromConfigMap(data map[string]string, mesh *meshv1alpha1.MeshConfig) (*Settings, error) {
	cfg, values := DefaultConfig(), DefaultValues()
	var err error
	if c, ok := data["config"]; ok {
		if cfg, err = ParseConfig([]byte(c)); err != nil {
			return nil, err
		}
	}
	if v, ok := data["values"]; ok {
		if values, err = ParseValues([]byte(v)); err != nil {
			return nil, err
		}
	}
	return NewSettings(cfg, values, mesh)
}

// mergeValues returns base with over laid on top: maps merge key by key,
// anything else in over replaces base's.
func mergeValues(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if bm, ok := out[k].(map[string]any); ok {
			if om, ok := v.(map[string]any); ok {
				out[k] = mergeValues(bm, om)
				continue
			}
		}
		out[k] = v
	}
	return out
}
