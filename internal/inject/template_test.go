package inject

import (
	"bytes"
	"encoding/json"
	"testing"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type stringer string

func (s stringer) String() string { return string(s) }

// TestTemplateFuncs: each function a sidecar template can call, as a
// template calls it, on the values that decide its result.
func TestTemplateFuncs(t *testing.T) {
	data := map[string]any{
		"Meta": metav1.ObjectMeta{Annotations: map[string]string{"a": "x", "empty": ""}},
		"Spec": corev1.PodSpec{Containers: []corev1.Container{
			{Name: "app", Ports: []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 81}}},
			{Name: ProxyContainerName, Ports: []corev1.ContainerPort{{ContainerPort: 15090}}},
			{Name: "side", Ports: []corev1.ContainerPort{{ContainerPort: 82}}},
		}},
		"PC":    &meshv1alpha1.ProxyConfig{Concurrency: nil, StatusPort: 15020},
		"NilPC": (*meshv1alpha1.ProxyConfig)(nil),
		"Strs":  []string{"a", "b"},
		"Anys":  []any{1, "b", true},
		"Map":   map[string]any{"k": "v"},
		"None":  map[string]any{},
		"List0": []any{},
		"Str":   stringer("s"),
		"Str0":  stringer(""),
		"Num":   json.Number("0"),
		"Num1":  json.Number("1.5"),
		"I32":   int32(0),
		"I64":   int64(3),
		"U32":   uint32(0),
		"F":     0.0,
		"Bad":   func() {},
		"Raw":   []byte("x"),
	}
	cases := []struct{ tmpl, want string }{
		{`{{ annotation .Meta "a" "d" }}`, "x"},
		{`{{ annotation .Meta "empty" "d" }}`, ""},
		{`{{ annotation .Meta "b" 15020 }}`, "15020"},
		{`{{ annotation .Meta "b" nil }}`, ""},
		{`{{ isset .Meta.Annotations "a" }} {{ isset .Meta.Annotations "b" }}`, "true false"},
		{`{{ excludeInboundPort 15020 "15090, 15021" }}`, "15090,15021,15020"},
		{`{{ excludeInboundPort "15020" "15020,15090" }}`, "15020,15090"},
		{`{{ excludeInboundPort 0 " 15090 " }}`, "15090"},
		{`{{ excludeInboundPort "" "15090" }}`, "15090"},
		{`{{ excludeInboundPort nil nil }}`, ""},
		{`{{ excludeInboundPort 15020 nil }}`, "15020"},
		{`{{ excludeInboundPort " 15020 " ",,15090," }}`, "15090,15020"},
		// empty, through valueOrDefault: "D" means the value counted as empty.
		{`{{ valueOrDefault nil "D" }}`, "D"},
		{`{{ valueOrDefault "" "D" }} {{ valueOrDefault "v" "D" }}`, "D v"},
		{`{{ valueOrDefault false "D" }} {{ valueOrDefault true "D" }}`, "D true"},
		{`{{ valueOrDefault 0 "D" }} {{ valueOrDefault 2 "D" }}`, "D 2"},
		{`{{ valueOrDefault .I32 "D" }} {{ valueOrDefault .I64 "D" }} {{ valueOrDefault .U32 "D" }} {{ valueOrDefault .F "D" }}`, "D 3 D D"},
		{`{{ valueOrDefault 1.5 "D" }}`, "1.5"},
		{`{{ valueOrDefault .Num "D" }} {{ valueOrDefault .Num1 "D" }}`, "D 1.5"},
		{`{{ valueOrDefault .List0 "D" }} {{ valueOrDefault .Anys "D" }}`, "D [1 b true]"},
		{`{{ valueOrDefault .None "D" }} {{ valueOrDefault .Map "D" }}`, "D map[k:v]"},
		{`{{ valueOrDefault .Str0 "D" }} {{ valueOrDefault .Str "D" }}`, "D s"},
		{`{{ valueOrDefault .Raw "D" }}`, "[120]"},
		{`{{ "" | default "15001" }} {{ "x" | default "15001" }} {{ default "d" }}`, "15001 x d"},
		{`{{ quote "a" 1 nil }}`, `"a" "1" ""`},
		{`{{ quote }}`, ``},
		{`{{ toJSON .Map }} {{ toJson .Strs }} {{ structToJSON .PC }}`, `{"k":"v"} ["a","b"] {"statusPort":15020}`},
		{`{{ toJSON .Bad }}`, "null"},
		{`{{ protoToJSON .NilPC }} {{ toJSON .NilPC }}`, "{} {}"},
		{`{{ (fromJSON "{\"a\":[1,2]}").a }} {{ fromJSON "{" }}`, "[1 2] <no value>"},
		{`{{ toYaml .Map }}|{{ toYaml .Bad }}|`, "k: v||"},
		{`{{ indent 2 "a\nb" }}|{{ nindent 1 "a" }}`, "  a\n  b|\n a"},
		{`{{ join "," .Strs }} {{ join "-" .Anys }} {{ join "," 7 }}`, "a,b 1-b-true 7"},
		{`{{ $d := dict "a" 1 "b" 2 "c" }}{{ len $d }} {{ $d.a }} {{ $d.b }}`, "2 1 2"},
		{`{{ toLower "AB" }} {{ toUpper "ab" }} {{ contains "b" "abc" }} {{ hasPrefix "a" "abc" }} {{ hasPrefix "b" "abc" }} {{ trimSpace " x " }}`, "ab AB true true false x"},
		{`{{ split "," "a,b" }} {{ list 1 "a" }}`, "[a b] [1 a]"},
		{`{{ range containerPorts .Spec }}{{ .ContainerPort }} {{ end }}`, "80 81 82 "},
		{`{{ appContainers .Spec }}`, "app,side"},
	}
	for _, tc := range cases {
		tm, err := parseTemplate("t", tc.tmpl)
		if err != nil {
			t.Fatalf("%s: %v", tc.tmpl, err)
		}
		var b bytes.Buffer
		if err := tm.Execute(&b, data); err != nil {
			t.Errorf("%s: %v", tc.tmpl, err)
			continue
		}
		if b.String() != tc.want {
			t.Errorf("%s = %q, want %q", tc.tmpl, b.String(), tc.want)
		}
	}
}

func TestParseUserVolumes(t *testing.T) {
	cases := []struct {
		in, want, err string
	}{
		{"", "[]", ""},
		{"  ", "[]", ""},
		{`[{"name":"a","emptyDir":{}}]`, `["a"]`, ""},
		{`[{"emptyDir":{}}]`, "", "a volume has no name"},
		{`{"b":{"emptyDir":{}},"a":{"secret":{"secretName":"s"}}}`, `["a","b"]`, ""},
		{`{`, "", "unexpected end of JSON input"},
	}
	for _, tc := range cases {
		vs, err := parseUserVolumes(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("parseUserVolumes(%q) error = %v, want %s", tc.in, err, tc.err)
			}
			continue
		}
		names := []string{}
		for _, v := range vs {
			names = append(names, v.Name)
		}
		if got, _ := json.Marshal(names); err != nil || string(got) != tc.want {
			t.Errorf("parseUserVolumes(%q) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	mounts := []struct {
		in, want, err string
	}{
		{"", "[]", ""},
		{`[{"name":"a","mountPath":"/a"}]`, `["a:/a"]`, ""},
		{`[{"name":"a"}]`, "", "a volume mount needs name and mountPath"},
		{`[{"mountPath":"/a"}]`, "", "a volume mount needs name and mountPath"},
		{`{"b":{"mountPath":"/b"},"a":{"mountPath":"/a","readOnly":true}}`, `["a:/a","b:/b"]`, ""},
		{`{"a":{"readOnly":true}}`, "", `volume mount "a" has no mountPath`},
		{`[1]`, "", "json: cannot unmarshal array into Go value of type map[string]v1.VolumeMount"},
	}
	for _, tc := range mounts {
		ms, err := parseUserVolumeMounts(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("parseUserVolumeMounts(%q) error = %v, want %s", tc.in, err, tc.err)
			}
			continue
		}
		names := []string{}
		for _, m := range ms {
			names = append(names, m.Name+":"+m.MountPath)
		}
		if got, _ := json.Marshal(names); err != nil || string(got) != tc.want {
			t.Errorf("parseUserVolumeMounts(%q) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	meta := metav1.ObjectMeta{Annotations: map[string]string{annoUserVolume: `{"v":{"emptyDir":{}}}`, annoUserVolumeMount: "{"}}
	if v := userVolumes(meta); len(v) != 1 || v[0].Name != "v" {
		t.Errorf("userVolumes = %+v", v)
	}
	if m := userVolumeMounts(meta); m != nil {
		t.Errorf("userVolumeMounts of invalid JSON = %+v, want none", m)
	}
}
