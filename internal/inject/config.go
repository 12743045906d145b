package inject

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/template"

	"google.golang.org/protobuf/encoding/protojson"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/straitmesh/strait/internal/istioconfig"
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

// GatewayTemplateName is the template of a gateway pod
// (inject.istio.io/templates: gateway, as Istio's): the proxy in router
// mode, no capture.
const GatewayTemplateName = "gateway"

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

//go:embed data/gateway.yaml.tmpl
var defaultGatewayTemplate string

//go:embed data/values.yaml
var defaultValuesYAML []byte

// DefaultConfig is the configuration shipped in the repository: policy
// enabled, the sidecar template by default and the gateway template for
// the pods that name it.
func DefaultConfig() *Config {
	return &Config{
		Policy:           PolicyEnabled,
		DefaultTemplates: []string{SidecarTemplateName},
		Templates:        map[string]string{SidecarTemplateName: defaultSidecarTemplate, GatewayTemplateName: defaultGatewayTemplate},
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
// istioconfig.
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

// MaxSettingsBytes is the largest injector config, values or mesh config
// read: a ConfigMap holds at most 1 MiB, and the bound keeps a wrong path
// from taking the process's memory.
const MaxSettingsBytes = 4 << 20

// ReadSettingsFile reads an injector config, values or mesh config file of
// at most MaxSettingsBytes.
func ReadSettingsFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSettingsBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > MaxSettingsBytes {
		return nil, fmt.Errorf("%s: larger than %d MiB (a ConfigMap holds at most 1 MiB); is this the right file?", path, MaxSettingsBytes>>20)
	}
	return b, nil
}

// configFields are the injector config's fields, for messages.
const configFields = "policy, defaultTemplates, templates, template, neverInjectSelector, alwaysInjectSelector, injectedAnnotations"

// ParseConfig reads the injector configuration (YAML or JSON). A ConfigMap
// manifest is accepted too: its data.config is read.
func ParseConfig(data []byte) (*Config, error) {
	data, err := unwrapConfigMap("injector config", data, "config")
	if err != nil {
		return nil, err
	}
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		msg := yamlErrorText(err, data)
		if strings.Contains(msg, "unknown field") {
			msg += " (the injector config has " + configFields + ")"
		}
		return nil, fmt.Errorf("injector config: %s", msg)
	}
	return &c, nil
}

// ParseValues reads values (YAML or JSON). A ConfigMap manifest is accepted
// too: its data.values is read.
func ParseValues(data []byte) (Values, error) {
	data, err := unwrapConfigMap("injector values", data, "values")
	if err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("injector values: %s", yamlErrorText(err, data))
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
	data, err := unwrapConfigMap("mesh config", data, "mesh")
	if err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("mesh config: %s", yamlErrorText(err, data))
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

// unwrapConfigMap returns data.key of a ConfigMap manifest, or raw itself
// when it is not a manifest. A ConfigMap without the key, or a manifest of
// another kind, is an error: read as settings, it would silently be the
// defaults.
func unwrapConfigMap(what string, raw []byte, key string) ([]byte, error) {
	if len(raw) > MaxSettingsBytes {
		return nil, fmt.Errorf("%s: larger than %d MiB (a ConfigMap holds at most 1 MiB)", what, MaxSettingsBytes>>20)
	}
	var m struct {
		APIVersion string                     `json:"apiVersion"`
		Kind       string                     `json:"kind"`
		Data       map[string]json.RawMessage `json:"data"`
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil || json.Unmarshal(js, &m) != nil || m.Kind == "" {
		return raw, nil // not a manifest: the caller's parser says what is wrong
	}
	if m.Kind != "ConfigMap" {
		return nil, fmt.Errorf("%s: this is a %s %s, not the %s; give the file itself or the ConfigMap that holds it under data.%s", what, m.APIVersion, m.Kind, what, key)
	}
	v, ok := m.Data[key]
	if !ok {
		return nil, fmt.Errorf("%s: data.%s: the ConfigMap has no %s key; it holds the %s under data.%s", what, key, key, what, key)
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, fmt.Errorf("%s: data.%s: must be a string (write \"%s: |\" and the %s indented below it)", what, key, key, what)
	}
	return []byte(s), nil
}

// yamlErrorText is a YAML or strict-decoding error without the layers of
// "error converting YAML to JSON: yaml: " its libraries add.
func yamlErrorText(err error, data []byte) string {
	msg := err.Error()
	for _, prefix := range []string{"error converting YAML to JSON: ", "error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
		msg = strings.ReplaceAll(msg, prefix, "")
	}
	if strings.Contains(msg, "yaml: ") {
		return istioconfig.YAMLProblem(errors.New(msg), data, 1)
	}
	return msg
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
