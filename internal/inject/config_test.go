package inject

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fmtAny prints maps with sorted keys, as fmt does.
func fmtAny(v any) string { return fmt.Sprint(v) }

func TestValuesAccessors(t *testing.T) {
	v, err := ParseValues([]byte(`
global:
  proxy:
    statusPort: 15020
    isOn: true
    isOff: false
    sTrue: "TRUE"
    sYes: "yes"
    zero: 0
    half: 0.5
    list: [1]
  name: strait
`))
	if err != nil {
		t.Fatal(err)
	}
	strs := map[string]string{
		"global.proxy.statusPort": "15020", "global.name": "strait", "global.missing": "",
		"global.name.deeper": "", "nothing.at.all": "", "global.proxy.list": "[1]",
	}
	for path, want := range strs {
		if got := v.String(path); got != want {
			t.Errorf("String(%s) = %q, want %q", path, got, want)
		}
	}
	bools := map[string]bool{
		"global.proxy.isOn": true, "global.proxy.isOff": false, "global.proxy.sTrue": true, "global.proxy.sYes": false,
		"global.proxy.statusPort": true, "global.proxy.zero": false, "global.proxy.half": true,
		"global.proxy.list": false, "global.missing": false,
	}
	for path, want := range bools {
		if got := v.Bool(path); got != want {
			t.Errorf("Bool(%s) = %v, want %v", path, got, want)
		}
	}
}

func TestParseSettingsFiles(t *testing.T) {
	const cmValues = "apiVersion: v1\nkind: ConfigMap\ndata:\n  values: |\n    global:\n      hub: example.com\n"
	v, err := ParseValues([]byte(cmValues))
	if err != nil || v.String("global.hub") != "example.com" {
		t.Errorf("values from a ConfigMap: %v %v", v, err)
	}
	for _, empty := range []string{"", "null", "  \n"} {
		if v, err := ParseValues([]byte(empty)); err != nil || v == nil || len(v) != 0 {
			t.Errorf("ParseValues(%q) = %v, %v; want an empty map", empty, v, err)
		}
	}
	for in, want := range map[string]string{
		"- a":  "injector values: not a map: ",
		"a: [": "injector values: ",
		"kind: ConfigMap\ndata:\n  values: \"- 1\"\n": "injector values: not a map: ",
	} {
		if _, err := ParseValues([]byte(in)); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("ParseValues(%q) error = %v, want %q...", in, err, want)
		}
	}

	m, err := ParseMeshConfig([]byte("kind: ConfigMap\ndata:\n  mesh: |\n    defaultConfig:\n      concurrency: 3\n"))
	if err != nil || m.GetDefaultConfig().GetConcurrency().GetValue() != 3 {
		t.Errorf("mesh from a ConfigMap: %v %v", m, err)
	}
	for _, empty := range []string{"", "null"} {
		if m, err := ParseMeshConfig([]byte(empty)); err != nil || m == nil {
			t.Errorf("ParseMeshConfig(%q) = %v, %v", empty, m, err)
		}
	}
	for in, want := range map[string]string{"bogusField: 1": "mesh config: ", "a: [": "mesh config: "} {
		if _, err := ParseMeshConfig([]byte(in)); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("ParseMeshConfig(%q) error = %v", in, err)
		}
	}

	c, err := ParseConfig([]byte("kind: ConfigMap\ndata:\n  config: |\n    policy: disabled\n"))
	if err != nil || c.Policy != PolicyDisabled {
		t.Errorf("config from a ConfigMap: %+v %v", c, err)
	}
	if _, err := ParseConfig([]byte("polcy: enabled")); err == nil || !strings.Contains(err.Error(), `unknown field "polcy"`) {
		t.Errorf("unknown field: %v", err)
	}
}

func TestNewSettings(t *testing.T) {
	cases := []struct {
		name string
		cfg  *Config
		want string // error, "" = ok
	}{
		{"nil is the default", nil, ""},
		{"empty policy is enabled", &Config{}, ""},
		{"bad policy", &Config{Policy: "sometimes"}, `injector config: policy "sometimes" is not "enabled" or "disabled"`},
		{"bad selector", &Config{NeverInjectSelector: []metav1.LabelSelector{{MatchLabels: map[string]string{"a b": "c"}}}}, "injector config: label selector: "},
		{"bad always selector", &Config{AlwaysInjectSelector: []metav1.LabelSelector{{MatchLabels: map[string]string{"a": "b c"}}}}, "injector config: label selector: "},
		{"bad template", &Config{Templates: map[string]string{"t": "{{"}, DefaultTemplates: []string{"t"}}, `injector config: template "t": `},
		{"undefined default", &Config{Templates: map[string]string{"t": "x"}, DefaultTemplates: []string{"t", "u"}}, `injector config: default template "u" is not defined in templates`},
		{"old single template", &Config{Template: "spec: {}"}, ""},
	}
	for _, tc := range cases {
		s, err := NewSettings(tc.cfg, nil, nil)
		switch {
		case tc.want == "" && (err != nil || s == nil):
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s: error = %v, want %q...", tc.name, err, tc.want)
		}
	}
	s, err := NewSettings(&Config{Template: "spec: {}", Templates: map[string]string{"other": "x"}}, Values{"global": map[string]any{"hub": "h"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Config.Policy != PolicyEnabled || strings.Join(s.Config.DefaultTemplates, ",") != SidecarTemplateName ||
		s.Config.Templates[SidecarTemplateName] != "spec: {}" || s.Mesh == nil {
		t.Errorf("normalized config: %+v", s.Config)
	}
	// Values layer over the shipped ones key by key.
	if s.Values.String("global.hub") != "h" || s.Values.String("global.proxy.image") == "" {
		t.Errorf("merged values: hub %q, proxy image %q", s.Values.String("global.hub"), s.Values.String("global.proxy.image"))
	}
	// A single template does not replace one given under its name.
	s, err = NewSettings(&Config{Template: "a: 1", Templates: map[string]string{SidecarTemplateName: "spec: {}"}}, nil, nil)
	if err != nil || s.Config.Templates[SidecarTemplateName] != "spec: {}" {
		t.Errorf("template vs templates: %v %v", s, err)
	}
}

func TestMergeValues(t *testing.T) {
	base := map[string]any{"a": map[string]any{"x": 1, "y": 2}, "b": 1, "c": map[string]any{"z": 1}}
	over := map[string]any{"a": map[string]any{"y": 3, "w": 4}, "b": map[string]any{"q": 1}, "c": "flat", "d": 5}
	got := mergeValues(base, over)
	want := "map[a:map[w:4 x:1 y:3] b:map[q:1] c:flat d:5]"
	if s := fmtAny(got); s != want {
		t.Errorf("mergeValues = %s, want %s", s, want)
	}
	if fmtAny(base) != "map[a:map[x:1 y:2] b:1 c:map[z:1]]" {
		t.Errorf("mergeValues changed its input: %s", fmtAny(base))
	}
}

func TestSettingsFromConfigMapKeys(t *testing.T) {
	s, err := SettingsFromConfigMap(map[string]string{"values": "global:\n  hub: h\n"}, nil)
	if err != nil || s.Values.String("global.hub") != "h" || s.Config.Policy != PolicyEnabled {
		t.Errorf("values only: %v", err)
	}
	s, err = SettingsFromConfigMap(map[string]string{"config": "policy: disabled\n"}, nil)
	if err != nil || s.Config.Policy != PolicyDisabled {
		t.Errorf("config only: %v", err)
	}
	if _, err := SettingsFromConfigMap(map[string]string{"config": "polcy: x"}, nil); err == nil {
		t.Error("bad config accepted")
	}
	if _, err := SettingsFromConfigMap(map[string]string{"values": "- 1"}, nil); err == nil {
		t.Error("bad values accepted")
	}
}
