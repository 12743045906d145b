package inject

import (
	"strings"
	"testing"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	typev1beta1 "istio.io/api/networking/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestProxyImage(t *testing.T) {
	values := func(hub, image, tag string) Values {
		return Values{"global": map[string]any{"hub": hub, "tag": tag, "proxy": map[string]any{"image": image}}}
	}
	typed := func(t string) *meshv1alpha1.ProxyConfig {
		return &meshv1alpha1.ProxyConfig{Image: &typev1beta1.ProxyImage{ImageType: t}}
	}
	cases := []struct {
		name   string
		values Values
		pc     *meshv1alpha1.ProxyConfig
		annos  map[string]string
		want   string
	}{
		{"hub/image:tag", values("h.io/s", "proxy", "1.0"), nil, nil, "h.io/s/proxy:1.0"},
		{"annotation wins", values("h", "proxy", "1"), typed("debug"), map[string]string{annoProxyImage: "x/y:z"}, "x/y:z"},
		{"empty annotation does not", values("h", "proxy", "1"), nil, map[string]string{annoProxyImage: ""}, "h/proxy:1"},
		{"image type", values("h", "proxy", "1"), typed("distroless"), nil, "h/proxy-distroless:1"},
		{"default image type", values("h", "proxy", "1"), typed("default"), nil, "h/proxy:1"},
		{"image with a slash is taken as is", values("h", "r.io/proxy:2", "1"), typed("debug"), nil, "r.io/proxy:2-debug"},
		{"no hub", values("", "proxy", "1"), nil, nil, "proxy:1"},
		{"no tag", values("h", "proxy", ""), nil, nil, "h/proxy"},
	}
	for _, tc := range cases {
		if got := proxyImage(tc.values, tc.pc, tc.annos); got != tc.want {
			t.Errorf("%s: proxyImage = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestIsYes(t *testing.T) {
	for s, want := range map[string]bool{"y": true, " YES ": true, "true": true, "On": true, "no": false, "": false, "1": false, "false": false} {
		if isYes(s) != want {
			t.Errorf("isYes(%q) = %v", s, !want)
		}
	}
}

func TestWorkloadOf(t *testing.T) {
	owner := func(kind, name string, controller bool) []metav1.OwnerReference {
		c := controller
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, Controller: &c}}
	}
	cases := []struct {
		name string
		pod  corev1.Pod
		want string // apiVersion kind name
	}{
		{"bare pod", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, "v1 Pod p"},
		{"generated name", corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-"}}, "v1 Pod web"},
		{"not a controller", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: owner("ReplicaSet", "rs", false)}}, "v1 Pod p"},
		{"deployment", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"pod-template-hash": "5d8f"},
			OwnerReferences: owner("ReplicaSet", "web-5d8f", true)}}, "apps/v1 Deployment web"},
		{"replicaset without the hash", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"pod-template-hash": "5d8f"},
			OwnerReferences: owner("ReplicaSet", "web", true)}}, "apps/v1 ReplicaSet web"},
		{"replicaset, no hash label", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: owner("ReplicaSet", "web-", true)}}, "apps/v1 ReplicaSet web-"},
		{"cronjob", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: owner("Job", "backup-28391234", true)}}, "batch/v1 CronJob backup"},
		{"job with a short suffix", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: owner("Job", "backup-12345", true)}}, "apps/v1 Job backup-12345"},
		{"job named only digits", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: owner("Job", "-123456", true)}}, "apps/v1 Job -123456"},
		{"statefulset", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: owner("StatefulSet", "db", true)}}, "apps/v1 StatefulSet db"},
	}
	for _, tc := range cases {
		tm, meta := workloadOf(&tc.pod, "ns")
		got := tm.APIVersion + " " + tm.Kind + " " + meta.Name
		if got != tc.want || meta.Namespace != "ns" {
			t.Errorf("%s: workloadOf = %q in %q, want %q", tc.name, got, meta.Namespace, tc.want)
		}
	}
}

func TestInjectedNamesStatus(t *testing.T) {
	var n injectedNames
	n.add(&corev1.Pod{Spec: corev1.PodSpec{
		InitContainers:   []corev1.Container{{Name: "istio-init"}},
		Containers:       []corev1.Container{{Name: "istio-proxy"}, {Name: "istio-proxy"}},
		Volumes:          []corev1.Volume{{Name: "a"}, {Name: "b"}},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "s"}},
	}})
	n.add(&corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "b"}, {Name: "c"}}}})
	want := `{"initContainers":["istio-init"],"containers":["istio-proxy"],"volumes":["a","b","c"],"imagePullSecrets":["s"],"revision":"default"}`
	if got := n.status(""); got != want {
		t.Errorf("status = %s\nwant %s", got, want)
	}
	if got := n.status("canary"); !strings.HasSuffix(got, `"revision":"canary"}`) {
		t.Errorf("status(canary) = %s", got)
	}
}

func TestMoveByName(t *testing.T) {
	id := func(s string) string { return s }
	cases := []struct {
		list, names []string
		first       bool
		want        string
	}{
		{[]string{"a", "x", "b", "y"}, []string{"y", "x"}, true, "y,x,a,b"},
		{[]string{"a", "x", "b", "y"}, []string{"y", "x"}, false, "a,b,y,x"},
		{[]string{"a", "b"}, nil, true, "a,b"},
		{[]string{"a", "b"}, []string{"z"}, true, "a,b"},
		{[]string{"x", "x", "a"}, []string{"x"}, false, "a,x"},
	}
	for _, tc := range cases {
		if got := strings.Join(moveByName(tc.list, tc.names, tc.first, id), ","); got != tc.want {
			t.Errorf("moveByName(%v, %v, %v) = %s, want %s", tc.list, tc.names, tc.first, got, tc.want)
		}
	}
}

func TestToNativeSidecar(t *testing.T) {
	tp := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "istio-init"}},
		Containers:     []corev1.Container{{Name: "other"}, {Name: ProxyContainerName}},
	}}
	toNativeSidecar(tp)
	if len(tp.Spec.Containers) != 1 || tp.Spec.Containers[0].Name != "other" || len(tp.Spec.InitContainers) != 2 {
		t.Fatalf("containers %+v, init %+v", tp.Spec.Containers, tp.Spec.InitContainers)
	}
	p := tp.Spec.InitContainers[1]
	if p.Name != ProxyContainerName || p.RestartPolicy == nil || *p.RestartPolicy != corev1.ContainerRestartPolicyAlways ||
		p.StartupProbe == nil || p.StartupProbe.HTTPGet.Path != "/healthz/ready" || p.StartupProbe.HTTPGet.Port.IntValue() != 15021 {
		t.Errorf("native sidecar: %+v", p)
	}
	// A template's own startup probe is kept; no proxy, no change.
	own := &corev1.Probe{PeriodSeconds: 7}
	tp = &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: ProxyContainerName, StartupProbe: own}}}}
	toNativeSidecar(tp)
	if tp.Spec.InitContainers[0].StartupProbe.PeriodSeconds != 7 {
		t.Errorf("startup probe replaced: %+v", tp.Spec.InitContainers[0].StartupProbe)
	}
	tp = &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
	toNativeSidecar(tp)
	if len(tp.Spec.Containers) != 1 || len(tp.Spec.InitContainers) != 0 {
		t.Errorf("pod without a proxy changed: %+v", tp.Spec)
	}
}

// TestMergeTemplateUserContainer: a pod that names a container like the
// template's customises it (its fields win, image "auto" keeps the
// injected image), wherever the template puts it.
func TestMergeTemplateUserContainer(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "istio-init", Args: []string{"mine"}}},
		Containers: []corev1.Container{
			{Name: "app", Image: "app"},
			{Name: ProxyContainerName, Image: "auto", Env: []corev1.EnvVar{{Name: "MINE", Value: "1"}}},
		},
	}}
	tmpl := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: ProxyContainerName, Image: "proxy:1", Env: []corev1.EnvVar{{Name: "T", Value: "t"}}}},
		Containers:     []corev1.Container{{Name: "istio-init", Image: "init:1", Args: []string{"tmpl"}}},
	}}
	out, err := mergeTemplate(pod, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]corev1.Container{}
	for _, c := range append(out.Spec.InitContainers, out.Spec.Containers...) {
		if _, dup := byName[c.Name]; dup {
			t.Errorf("container %s twice", c.Name)
		}
		byName[c.Name] = c
	}
	p, i := byName[ProxyContainerName], byName["istio-init"]
	if p.Image != "proxy:1" || len(p.Env) != 2 || i.Image != "init:1" || strings.Join(i.Args, ",") != "mine" || byName["app"].Image != "app" {
		t.Errorf("merged: proxy %+v, init %+v", p, i)
	}
	if len(pod.Spec.Containers) != 2 {
		t.Errorf("mergeTemplate changed its input: %+v", pod.Spec.Containers)
	}
}

// TestMergeTemplateUserContainerNotFirst: the user's customization reaches
// the injected container wherever it sits in its list, not only first.
func TestMergeTemplateUserContainerNotFirst(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "app", Image: "app"},
		{Name: ProxyContainerName, Image: "auto", Env: []corev1.EnvVar{{Name: "MINE", Value: "1"}}},
	}}}
	tmpl := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "helper", Image: "helper:1"},
		{Name: ProxyContainerName, Image: "proxy:1"},
	}}}
	out, err := mergeTemplate(pod, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range out.Spec.Containers {
		names = append(names, c.Name)
		if c.Name != ProxyContainerName {
			continue
		}
		if c.Image != "proxy:1" || len(c.Env) != 1 || c.Env[0].Name != "MINE" {
			t.Errorf("merged proxy: image %q, env %+v; want the template's image and the user's env", c.Image, c.Env)
		}
	}
	if len(names) != 3 || names[0] == ProxyContainerName {
		t.Fatalf("containers %v: want app, helper and the proxy, the proxy not first", names)
	}
}

// TestInjectWorkloadNamespace: the template's .DeploymentMeta.Namespace is
// the namespace the request names for its workload, else the pod's (or
// the default one).
func TestInjectWorkloadNamespace(t *testing.T) {
	s, err := NewSettings(&Config{Templates: map[string]string{SidecarTemplateName: "metadata:\n  annotations:\n    workload-namespace: \"{{ .DeploymentMeta.Namespace }}\"\n"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	inj := New(s, Options{})
	cases := []struct {
		name, podNamespace, workloadNamespace, want string
	}{
		{"the workload's own", "ns", "other", "other"},
		{"the pod's", "ns", "", "ns"},
		{"the default", "", "", "default"},
	}
	for _, tc := range cases {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: tc.podNamespace},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
		}
		res, err := inj.Inject(Request{Pod: pod, Workload: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			WorkloadMeta: metav1.ObjectMeta{Name: "d", Namespace: tc.workloadNamespace}})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := res.Pod.Annotations["workload-namespace"]; got != tc.want {
			t.Errorf("%s: .DeploymentMeta.Namespace = %q, want %q", tc.name, got, tc.want)
		}
	}
}
