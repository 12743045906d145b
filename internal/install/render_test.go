package install

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/testreq"
)

const chartDir = "../../manifests/charts/strait"

func render(t *testing.T, opts RenderOptions) Rendered {
	t.Helper()
	c, err := LoadChart()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Render(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s among the rendered objects", kind, name)
	return nil
}

func str(t *testing.T, o *unstructured.Unstructured, path ...string) string {
	t.Helper()
	v, _, err := unstructured.NestedFieldNoCopy(o.Object, path...)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := v.(string)
	return s
}

// TestRenderDefaults: with no values the chart gives the Istio CRDs and
// every object straitd needs, labelled for uninstall, in install order.
func TestRenderDefaults(t *testing.T) {
	r := render(t, RenderOptions{})
	if len(r.CRDs) < 14 {
		t.Errorf("%d CRDs, want the Istio CRDs (at least 14)", len(r.CRDs))
	}
	find(t, r.CRDs, "CustomResourceDefinition", "virtualservices.networking.istio.io")
	for _, want := range []struct{ kind, name string }{
		{"ServiceAccount", "straitd"}, {"ClusterRole", "straitd-istio-system"}, {"ClusterRoleBinding", "straitd-istio-system"},
		{"Role", "straitd"}, {"RoleBinding", "straitd"}, {"ConfigMap", "istio-sidecar-injector"}, {"ConfigMap", "istio"},
		{"Service", "istiod"}, {"Deployment", "straitd"}, {"PodDisruptionBudget", "straitd"},
		{"MutatingWebhookConfiguration", "istio-sidecar-injector"},
	} {
		o := find(t, r.Objects, want.kind, want.name)
		if l := o.GetLabels(); l[InstanceLabel] != DefaultRelease || l[PartOfLabel] != PartOfValue {
			t.Errorf("%s %s labels %v, want %s=%s and %s=%s", want.kind, want.name, l, InstanceLabel, DefaultRelease, PartOfLabel, PartOfValue)
		}
		if o.GetNamespace() != "" && o.GetNamespace() != DefaultNamespace {
			t.Errorf("%s %s in namespace %q", want.kind, want.name, o.GetNamespace())
		}
	}
	for _, o := range r.CRDs {
		if o.GetLabels()[InstanceLabel] != DefaultRelease {
			t.Errorf("CRD %s has no instance label", o.GetName())
		}
	}
	rank := map[string]int{}
	for i, o := range r.Objects {
		rank[o.GetKind()] = i
	}
	if rank["ServiceAccount"] > rank["Deployment"] || rank["ConfigMap"] > rank["Deployment"] || r.Objects[len(r.Objects)-1].GetKind() != "MutatingWebhookConfiguration" {
		t.Errorf("install order %v: want the ServiceAccount and ConfigMaps before the Deployment, the webhook last", rank)
	}
	dep := find(t, r.Objects, "Deployment", "straitd")
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	if c["image"] != "strait/straitd:latest" {
		t.Errorf("straitd image %v, want strait/straitd:latest", c["image"])
	}
	if !strings.Contains(strings.Join(toStrings(c["args"]), " "), "--namespace=istio-system") {
		t.Errorf("straitd args %v lack --namespace=istio-system", c["args"])
	}
	svc := find(t, r.Objects, "Service", "istiod")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	got := map[int64]int64{}
	for _, p := range ports {
		m := p.(map[string]any)
		got[m["port"].(int64)] = m["targetPort"].(int64)
	}
	for port, target := range map[int64]int64{15010: 15010, 15012: 15012, 15014: 15014, 443: 15017} {
		if got[port] != target {
			t.Errorf("Service istiod port %d → %d, want → %d (ports %v)", port, got[port], target, got)
		}
	}
	mwc := find(t, r.Objects, "MutatingWebhookConfiguration", "istio-sidecar-injector")
	hooks, _, _ := unstructured.NestedSlice(mwc.Object, "webhooks")
	if len(hooks) != 2 {
		t.Fatalf("%d webhooks, want 2 (namespace and object selectors)", len(hooks))
	}
	for _, h := range hooks {
		cc := h.(map[string]any)["clientConfig"].(map[string]any)
		if _, ok := cc["caBundle"]; ok {
			t.Errorf("webhook sets caBundle; straitd owns that field")
		}
	}
	cm := find(t, r.Objects, "ConfigMap", "istio-sidecar-injector")
	if v := str(t, cm, "data", "values"); !strings.Contains(v, `"hub": "strait"`) || !strings.Contains(v, `"istioNamespace": "istio-system"`) {
		t.Errorf("injector values %s: want the hub and the istioNamespace", v)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestRenderIstioValues: Istio's value names steer the objects.
func TestRenderIstioValues(t *testing.T) {
	vals, err := MergeValues([]string{writeFile(t, `
global:
  hub: registry.example.com/mesh
  tag: "1.2.3"
  proxy:
    image: proxyv2
    logLevel: debug
  defaultPodDisruptionBudget:
    enabled: false
pilot:
  replicaCount: 2
  pluggedCA: true
  env:
    PILOT_DEBOUNCE_AFTER: 50ms
sidecarInjectorWebhook:
  enableNativeSidecars: true
  enableNamespacesByDefault: true
meshConfig:
  trustDomain: example.org
`)}, []string{"global.tag=1.2.4", "pilot.env.PILOT_USE_ENDPOINT_SLICE=false", "pilot.env.PILOT_TRACE_SAMPLING=20"}, []string{"pilot.env.PILOT_PUSH_THROTTLE=100"})
	if err != nil {
		t.Fatal(err)
	}
	r := render(t, RenderOptions{Namespace: "mesh", Release: "r1", Values: vals})
	for _, o := range r.Objects {
		if o.GetKind() == "PodDisruptionBudget" {
			t.Errorf("PodDisruptionBudget rendered with global.defaultPodDisruptionBudget.enabled=false")
		}
	}
	dep := find(t, r.Objects, "Deployment", "straitd")
	if n, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas"); n != 2 {
		t.Errorf("replicas %d, want 2", n)
	}
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	if c["image"] != "registry.example.com/mesh/straitd:1.2.4" {
		t.Errorf("image %v, want registry.example.com/mesh/straitd:1.2.4 (--set after -f)", c["image"])
	}
	args := strings.Join(toStrings(c["args"]), " ")
	if !strings.Contains(args, "--trust-domain=example.org") || !strings.Contains(args, "--namespace=mesh") {
		t.Errorf("args %s: want --trust-domain=example.org and --namespace=mesh", args)
	}
	if env := c["env"].([]any); !strings.Contains(strings.Join(envNames(env), ","), "PILOT_DEBOUNCE_AFTER,PILOT_PUSH_THROTTLE") {
		t.Errorf("env %v lacks PILOT_DEBOUNCE_AFTER (-f) and PILOT_PUSH_THROTTLE (--set-string)", env)
	}
	// --set makes true/false and numbers non-strings; the environment
	// gets them as text.
	for _, e := range c["env"].([]any) {
		m := e.(map[string]any)
		switch m["name"] {
		case "PILOT_USE_ENDPOINT_SLICE":
			if m["value"] != "false" {
				t.Errorf("env PILOT_USE_ENDPOINT_SLICE=%#v, want the string false", m["value"])
			}
		case "PILOT_TRACE_SAMPLING":
			if m["value"] != "20" {
				t.Errorf("env PILOT_TRACE_SAMPLING=%#v, want the string 20", m["value"])
			}
		}
	}
	cm := find(t, r.Objects, "ConfigMap", "istio-sidecar-injector")
	v := str(t, cm, "data", "values")
	for _, want := range []string{`"image": "proxyv2"`, `"logLevel": "debug"`, `"enableNativeSidecars": true`, `"istioNamespace": "mesh"`, `"hub": "registry.example.com/mesh"`} {
		if !strings.Contains(v, want) {
			t.Errorf("injector values lack %s:\n%s", want, v)
		}
	}
	if mesh := str(t, find(t, r.Objects, "ConfigMap", "istio"), "data", "mesh"); !strings.Contains(mesh, "trustDomain: example.org") {
		t.Errorf("mesh config %q lacks the trust domain", mesh)
	}
	mwc := find(t, r.Objects, "MutatingWebhookConfiguration", "istio-sidecar-injector")
	hooks, _, _ := unstructured.NestedSlice(mwc.Object, "webhooks")
	if len(hooks) != 1 {
		t.Errorf("%d webhooks with enableNamespacesByDefault, want 1 (the object webhook would inject twice)", len(hooks))
	}
	if l := dep.GetLabels()[InstanceLabel]; l != "r1" {
		t.Errorf("instance label %q, want the release r1", l)
	}
}

func envNames(env []any) []string {
	var out []string
	for _, e := range env {
		out = append(out, e.(map[string]any)["name"].(string))
	}
	return out
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRenderRefuses: an unknown key is refused with its name, and so are
// settings the chart cannot honour.
func TestRenderRefuses(t *testing.T) {
	// Kubernetes' resource names are accepted: the standard ones,
	// hugepages-SIZE and domain-qualified extended resources.
	c, err := LoadChart()
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range []string{"global.proxy.resources.limits.cpu=2", "global.proxy.resources.requests.memory=64Mi", "global.proxy_init.resources.limits.ephemeral-storage=1Gi",
		"pilot.resources.limits.hugepages-2Mi=1Gi", `pilot.resources.limits.nvidia\.com/gpu=1`, "pilot.tolerations[0].key=k", "pilot.tolerations[0].effect=NoSchedule"} {
		vals, err := MergeValues(nil, []string{ok}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Render(c, RenderOptions{Values: vals}); err != nil {
			t.Errorf("--set %s refused: %v", ok, err)
		}
	}
	for _, tc := range []struct {
		name string
		set  string
		want string
	}{
		{"unknown top-level key", "pilott.replicaCount=2", "pilott"},
		{"unknown nested key", "global.proxy.imagee=x", "imagee"},
		{"unread mesh config field", "meshConfig.enableEnvoyAccessLogService=true", "enableEnvoyAccessLogService"},
		{"wrong type", "pilot.replicaCount=many", "replicaCount"},
		{"replicas without a shared CA", "pilot.replicaCount=3", "pilot.pluggedCA=true"},
		// The sidecar's resources reach the API server only in each
		// injected pod, which it would then refuse.
		{"sidecar resource name", "global.proxy.resources.limits.cpuu=1", "at '/global/proxy/resources/limits': additional properties 'cpuu' not allowed"},
		{"init resource name", "global.proxy_init.resources.requests.memry=1", "at '/global/proxy_init/resources/requests': additional properties 'memry'"},
		{"straitd resource name", "pilot.resources.requests.cpuu=1", "at '/pilot/resources/requests': additional properties 'cpuu'"},
		{"toleration field", "pilot.tolerations[0].keyy=x", "at '/pilot/tolerations/0': additional properties 'keyy'"},
		{"toleration effect", "pilot.tolerations[0].effect=NoSchedul", "at '/pilot/tolerations/0/effect'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals, err := MergeValues(nil, []string{tc.set}, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Render(c, RenderOptions{Values: vals})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("--set %s: err %v, want it to name %q", tc.set, err, tc.want)
			}
		})
	}
}

// TestHelmLint runs Helm's linter (what `helm lint` runs) with no values
// and with Istio-style values.
func TestHelmLint(t *testing.T) {
	for name, vals := range map[string]map[string]any{
		"no values":    nil,
		"istio values": {"global": map[string]any{"hub": "docker.io/istio", "tag": "1.0"}, "pilot": map[string]any{"replicaCount": 1}},
	} {
		t.Run(name, func(t *testing.T) {
			l := lint.AllWithKubeVersionAndSchemaValidation(chartDir, vals, "istio-system", &chartutil.DefaultCapabilities.KubeVersion, false)
			for _, m := range l.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				}
			}
		})
	}
	// And the linter does see a bad key (the test can fail).
	l := lint.All(chartDir, map[string]any{"bogus": 1}, "istio-system", false)
	if l.HighestSeverity < support.ErrorSev {
		t.Errorf("helm lint accepted an unknown key: %v", l.Messages)
	}
}

// TestChartCRDsMatchModule: the chart's CRDs are istio.io/api's, byte for
// byte, at the version go.mod requires. After bumping istio.io/api:
//
//	cp "$(go list -m -f '{{.Dir}}' istio.io/api)/kubernetes/customresourcedefinitions.gen.yaml" \
//	   manifests/charts/strait/crds/crd-all.gen.yaml
func TestChartCRDsMatchModule(t *testing.T) {
	goTool := testreq.Binary(t, "go", "golang-go", "/usr/local/go/bin/go")
	dir, err := exec.Command(goTool, "list", "-m", "-f", "{{.Dir}}", "istio.io/api").Output()
	if err != nil {
		t.Fatalf("go list -m istio.io/api: %v", err)
	}
	want, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "kubernetes", "customresourcedefinitions.gen.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(chartDir, "crds", "crd-all.gen.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("manifests/charts/strait/crds/crd-all.gen.yaml differs from istio.io/api's CRDs; copy them again (see this test's comment)")
	}
}

// TestRenderMeshConfig: the MeshConfig fields straitd honours are taken
// and reach the istio ConfigMap, where straitd's own parser accepts them.
func TestRenderMeshConfig(t *testing.T) {
	c, err := LoadChart()
	if err != nil {
		t.Fatal(err)
	}
	vals, err := MergeValues(nil, []string{"meshConfig.outboundTrafficPolicy.mode=REGISTRY_ONLY", "meshConfig.defaultConfig.terminationDrainDuration=7s",
		"meshConfig.pathNormalization.normalization=NONE", "meshConfig.accessLogFile=/dev/stdout", "meshConfig.accessLogEncoding=JSON"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Render(c, RenderOptions{Values: vals})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	var mesh string
	for _, o := range out.Objects {
		if o.GetKind() == "ConfigMap" && o.GetName() == "istio" {
			mesh, _, _ = unstructured.NestedString(o.Object, "data", "mesh")
		}
	}
	m, err := meshconfig.Parse([]byte(mesh))
	if err != nil {
		t.Fatalf("straitd refuses the chart's mesh config %q: %v", mesh, err)
	}
	if !m.RegistryOnly || m.Mesh.GetDefaultConfig().GetTerminationDrainDuration().AsDuration() != 7*time.Second ||
		m.Mesh.GetPathNormalization().GetNormalization().String() != "NONE" || m.Mesh.GetAccessLogFile() != "/dev/stdout" {
		t.Errorf("mesh config %q read as %+v", mesh, m)
	}
}

// TestSchemaMeshConfigIsHonoured: the chart's schema takes exactly the
// MeshConfig fields straitd honours (meshconfig.Honoured), so a field
// straitd implements can be set through the chart, and one it refuses is
// refused before anything is applied.
func TestSchemaMeshConfigIsHonoured(t *testing.T) {
	c, err := LoadChart()
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			MeshConfig struct {
				Properties map[string]struct {
					Properties map[string]json.RawMessage `json:"properties"`
				} `json:"properties"`
			} `json:"meshConfig"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(c.Schema, &schema); err != nil {
		t.Fatal(err)
	}
	var got []string
	for k, v := range schema.Properties.MeshConfig.Properties {
		got = append(got, k)
		if k == "defaultConfig" {
			for sub := range v.Properties {
				got = append(got, k+"."+sub)
			}
		}
	}
	var want []string
	for _, f := range meshconfig.Honoured() {
		if !strings.Contains(f, ".") || strings.HasPrefix(f, "defaultConfig.") {
			want = append(want, f)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("chart schema's meshConfig fields\n %v\nwant those straitd honours\n %v", got, want)
	}
}

// TestSetCommaHint: a list written into one --set value without
// escaping its comma is refused with Helm's syntax spelled out; escaped,
// it is one value.
func TestSetCommaHint(t *testing.T) {
	_, err := MergeValues(nil, []string{"global.proxy.excludeInboundPorts=80,443"}, nil)
	if err == nil || !strings.Contains(err.Error(), `write a comma inside a value as \,`) {
		t.Errorf("--set with an unescaped comma: err %v, want the \\, hint", err)
	}
	_, err = MergeValues(nil, nil, []string{"global.tag"})
	if err == nil || strings.Contains(err.Error(), "comma") {
		t.Errorf("--set-string without a value: err %v, want Helm's error and no comma hint", err)
	}
	v, err := MergeValues(nil, []string{`global.proxy.excludeInboundPorts=80\,443`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := v["global"].(map[string]any)["proxy"].(map[string]any)["excludeInboundPorts"]; got != "80,443" {
		t.Errorf(`excludeInboundPorts=80\,443 read as %#v, want "80,443"`, got)
	}
}

// TestIstioOperatorRefused: an IstioOperator given as a values file is
// named as such, with where its settings go.
func TestIstioOperatorRefused(t *testing.T) {
	f := writeFile(t, "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  values:\n    global:\n      hub: example.com\n")
	_, err := MergeValues([]string{f}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), f+" is an IstioOperator") || !strings.Contains(err.Error(), "spec.values") {
		t.Errorf("IstioOperator as values: err %v, want it named with where spec.values goes", err)
	}
}

// TestRenderIngressGateway: gateways.istio-ingressgateway.enabled renders
// Istio's ingress gateway objects (ServiceAccount, Deployment, Service)
// with the values' name, labels, type, ports and resources; the pod asks
// the injector for the gateway template (image auto, Istio's gateway
// chart's shape), which gives it strait-agent proxy router. Off by
// default; autoscaleEnabled true and unknown keys are refused.
func TestRenderIngressGateway(t *testing.T) {
	for _, o := range render(t, RenderOptions{}).Objects {
		if o.GetName() == "istio-ingressgateway" {
			t.Fatalf("%s istio-ingressgateway rendered by default", o.GetKind())
		}
	}
	withSet := func(sets ...string) RenderOptions {
		t.Helper()
		vals, err := MergeValues(nil, append([]string{"gateways.istio-ingressgateway.enabled=true"}, sets...), nil)
		if err != nil {
			t.Fatal(err)
		}
		return RenderOptions{Values: vals}
	}
	r := render(t, withSet("gateways.istio-ingressgateway.type=NodePort", "gateways.istio-ingressgateway.resources.requests.cpu=250m"))
	sa := find(t, r.Objects, "ServiceAccount", "istio-ingressgateway-service-account")
	if sa.GetLabels()[InstanceLabel] != DefaultRelease {
		t.Errorf("ServiceAccount labels %v lack the release's", sa.GetLabels())
	}
	role := find(t, r.Objects, "Role", "istio-ingressgateway-sds")
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	if len(rules) != 1 || fmt.Sprint(rules[0].(map[string]any)["resources"]) != "[secrets]" || fmt.Sprint(rules[0].(map[string]any)["verbs"]) != "[get watch list]" {
		t.Errorf("Role rules %v, want get, watch, list on secrets", rules)
	}
	rb := find(t, r.Objects, "RoleBinding", "istio-ingressgateway-sds")
	subjects, _, _ := unstructured.NestedSlice(rb.Object, "subjects")
	if len(subjects) != 1 || subjects[0].(map[string]any)["name"] != "istio-ingressgateway-service-account" || str(t, rb, "roleRef", "name") != "istio-ingressgateway-sds" {
		t.Errorf("RoleBinding %v → %v, want the gateway's ServiceAccount bound to its Role", subjects, rb.Object["roleRef"])
	}
	dep := find(t, r.Objects, "Deployment", "istio-ingressgateway")
	if dep.GetNamespace() != DefaultNamespace || dep.GetLabels()[InstanceLabel] != DefaultRelease {
		t.Errorf("Deployment in %q with labels %v", dep.GetNamespace(), dep.GetLabels())
	}
	podLabels, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "labels")
	for k, v := range map[string]string{"istio": "ingressgateway", "app": "istio-ingressgateway", "sidecar.istio.io/inject": "true"} {
		if podLabels[k] != v {
			t.Errorf("pod label %s = %q, want %q (labels %v)", k, podLabels[k], v, podLabels)
		}
	}
	if a := str(t, dep, "spec", "template", "metadata", "annotations", "inject.istio.io/templates"); a != "gateway" {
		t.Errorf("inject.istio.io/templates %q, want gateway", a)
	}
	if sa := str(t, dep, "spec", "template", "spec", "serviceAccountName"); sa != "istio-ingressgateway-service-account" {
		t.Errorf("serviceAccountName %q", sa)
	}
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	if c["name"] != "istio-proxy" || c["image"] != "auto" {
		t.Errorf("container %v %v, want istio-proxy with image auto", c["name"], c["image"])
	}
	if cpu, _, _ := unstructured.NestedString(c, "resources", "requests", "cpu"); cpu != "250m" {
		t.Errorf("cpu request %q, want the value's 250m", cpu)
	}
	svc := find(t, r.Objects, "Service", "istio-ingressgateway")
	if typ := str(t, svc, "spec", "type"); typ != "NodePort" {
		t.Errorf("Service type %q, want NodePort", typ)
	}
	sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	if sel["istio"] != "ingressgateway" || sel["app"] != "istio-ingressgateway" || len(sel) != 2 {
		t.Errorf("Service selector %v, want the gateway's labels", sel)
	}
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	got := map[int64]int64{}
	for _, p := range ports {
		m := p.(map[string]any)
		got[m["port"].(int64)] = m["targetPort"].(int64)
	}
	for port, target := range map[int64]int64{15021: 15021, 80: 80, 443: 443} {
		if got[port] != target {
			t.Errorf("Service port %d → %d, want → %d (ports %v)", port, got[port], target, got)
		}
	}

	c2, err := LoadChart()
	if err != nil {
		t.Fatal(err)
	}
	for set, want := range map[string]string{
		"gateways.istio-ingressgateway.autoscaleEnabled=true": "autoscaleEnabled",
		"gateways.istio-ingressgateway.replicas=3":            "replicas",
	} {
		if _, err := Render(c2, withSet(set)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--set %s: err %v, want one naming %s", set, err, want)
		}
	}
}

// TestRenderEgressGateway: gateways.istio-egressgateway.enabled renders
// Istio's egress gateway beside the ingress one (their own names, labels
// and Service types: ClusterIP for egress), each pod asking for the
// gateway template; off by default, and two gateways of one name, an
// autoscaled egress gateway and its unknown keys are refused naming the
// value.
func TestRenderEgressGateway(t *testing.T) {
	for _, o := range render(t, RenderOptions{}).Objects {
		if o.GetName() == "istio-egressgateway" {
			t.Fatalf("%s istio-egressgateway rendered by default", o.GetKind())
		}
	}
	withSet := func(sets ...string) RenderOptions {
		t.Helper()
		vals, err := MergeValues(nil, sets, nil)
		if err != nil {
			t.Fatal(err)
		}
		return RenderOptions{Values: vals}
	}
	r := render(t, withSet("gateways.istio-egressgateway.enabled=true", "gateways.istio-ingressgateway.enabled=true"))
	for name, want := range map[string]struct{ istio, typ string }{
		"istio-egressgateway":  {"egressgateway", "ClusterIP"},
		"istio-ingressgateway": {"ingressgateway", "LoadBalancer"},
	} {
		find(t, r.Objects, "ServiceAccount", name+"-service-account")
		find(t, r.Objects, "RoleBinding", name+"-sds")
		dep := find(t, r.Objects, "Deployment", name)
		podLabels, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "labels")
		if podLabels["istio"] != want.istio || podLabels["app"] != name || podLabels["sidecar.istio.io/inject"] != "true" {
			t.Errorf("%s pod labels %v, want istio=%s app=%s and injection", name, podLabels, want.istio, name)
		}
		if a := str(t, dep, "spec", "template", "metadata", "annotations", "inject.istio.io/templates"); a != "gateway" {
			t.Errorf("%s inject.istio.io/templates %q, want gateway", name, a)
		}
		if sa := str(t, dep, "spec", "template", "spec", "serviceAccountName"); sa != name+"-service-account" {
			t.Errorf("%s serviceAccountName %q", name, sa)
		}
		svc := find(t, r.Objects, "Service", name)
		if typ := str(t, svc, "spec", "type"); typ != want.typ {
			t.Errorf("%s Service type %q, want %s", name, typ, want.typ)
		}
		sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
		if sel["istio"] != want.istio || len(sel) != 2 {
			t.Errorf("%s Service selector %v", name, sel)
		}
	}
	egress := render(t, withSet("gateways.istio-egressgateway.enabled=true"))
	for _, o := range egress.Objects {
		if o.GetName() == "istio-ingressgateway" {
			t.Errorf("%s istio-ingressgateway rendered with only the egress gateway enabled", o.GetKind())
		}
	}
	ports, _, _ := unstructured.NestedSlice(find(t, egress.Objects, "Service", "istio-egressgateway").Object, "spec", "ports")
	if len(ports) != 2 {
		t.Errorf("egress Service ports %v, want http2 80 and https 443", ports)
	}

	c, err := LoadChart()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"gateways.istio-egressgateway.enabled=true", "gateways.istio-egressgateway.autoscaleEnabled=true"}, "gateways.istio-egressgateway.autoscaleEnabled"},
		{[]string{"gateways.istio-egressgateway.enabled=true", "gateways.istio-ingressgateway.enabled=true", "gateways.istio-egressgateway.name=istio-ingressgateway"}, "gateways.istio-egressgateway.name"},
		{[]string{"gateways.istio-egressgateway.enabled=true", "gateways.istio-egressgateway.replicas=3"}, "replicas"},
	} {
		if _, err := Render(c, withSet(tc.sets...)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %v: err %v, want one naming %s", tc.sets, err, tc.want)
		}
	}
}
