package inject

import (
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// mergeTemplate merges a rendered template into pod as a strategic merge
// patch (injection step 4): containers, init containers, volumes, env and ports
// are matched by name, so app containers are left as they are. A
// container the pod itself already names like a template container
// (istio-proxy, say) is a customization: its fields win over the
// template's.
func mergeTemplate(pod, tmpl *corev1.Pod) (*corev1.Pod, error) {
	base := pod.DeepCopy()
	userInit := takeContainers(&base.Spec.InitContainers, tmpl.Spec.InitContainers, tmpl.Spec.Containers)
	userMain := takeContainers(&base.Spec.Containers, tmpl.Spec.InitContainers, tmpl.Spec.Containers)

	orig, err := json.Marshal(base)
	if err != nil {
		return nil, err
	}
	patch, err := json.Marshal(tmpl)
	if err != nil {
		return nil, err
	}
	mergedJSON, err := strategicpatch.StrategicMergePatch(orig, patch, corev1.Pod{})
	if err != nil {
		return nil, err
	}
	out := &corev1.Pod{}
	if err := json.Unmarshal(mergedJSON, out); err != nil {
		return nil, err
	}
	for _, u := range userInit {
		if err := overlayContainer(out, u); err != nil {
			return nil, err
		}
	}
	for _, u := range userMain {
		if err := overlayContainer(out, u); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// takeContainers removes from list the containers named like a template
// container and returns them.
func takeContainers(list *[]corev1.Container, tmpls ...[]corev1.Container) []corev1.Container {
	var taken []corev1.Container
	*list = slices.DeleteFunc(*list, func(c corev1.Container) bool {
		for _, tl := range tmpls {
			for _, t := range tl {
				if t.Name == c.Name {
					taken = append(taken, c)
					return true
				}
			}
		}
		return false
	})
	return taken
}

// overlayContainer merges the user's container over the injected one of
// the same name, wherever the template put it.
func overlayContainer(pod *corev1.Pod, user corev1.Container) error {
	for _, list := range []*[]corev1.Container{&pod.Spec.InitContainers, &pod.Spec.Containers} {
		for i := range *list {
			if (*list)[i].Name != user.Name {
				continue
			}
			orig, err := json.Marshal((*list)[i])
			if err != nil {
				return err
			}
			if user.Image == "auto" {
				// Istio's convention: "auto" means the injected image, and
				// so its pull policy: the API server defaulted the policy of
				// the tag-less "auto" to Always before injection, which
				// would make the node pull an image it already has.
				user.Image = ""
				user.ImagePullPolicy = ""
			}
			patch, err := json.Marshal(user)
			if err != nil {
				return err
			}
			merged, err := strategicpatch.StrategicMergePatch(orig, patch, corev1.Container{})
			if err != nil {
				return fmt.Errorf("container %s: %w", user.Name, err)
			}
			var c corev1.Container
			if err := json.Unmarshal(merged, &c); err != nil {
				return err
			}
			(*list)[i] = c
			return nil
		}
	}
	return nil
}

// toNativeSidecar turns the template's istio-proxy into a Kubernetes
// native sidecar: an init container with restartPolicy Always, placed
// after istio-init, with a startup probe so the app containers start only
// once the proxy is ready (and a Job's pod completes when its app does).
func toNativeSidecar(tp *corev1.Pod) {
	i := slices.IndexFunc(tp.Spec.Containers, func(c corev1.Container) bool { return c.Name == ProxyContainerName })
	if i < 0 {
		return
	}
	c := tp.Spec.Containers[i]
	tp.Spec.Containers = slices.Delete(tp.Spec.Containers, i, i+1)
	always := corev1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	if c.StartupProbe == nil {
		c.StartupProbe = &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/healthz/ready",
				Port: intstr.FromInt32(15021),
			}},
			PeriodSeconds:    1,
			TimeoutSeconds:   3,
			FailureThreshold: 600,
		}
	}
	tp.Spec.InitContainers = append(tp.Spec.InitContainers, c)
}

// reorder puts the injected init containers (istio-init, then a native
// istio-proxy) before the pod's own, so the app's init containers already
// run with traffic captured; the injected containers go after the app's,
// so the app stays the first (default) container; injected volumes follow
// the pod's.
func reorder(pod *corev1.Pod, n *injectedNames) {
	pod.Spec.InitContainers = moveByName(pod.Spec.InitContainers, n.initContainers, true,
		func(c corev1.Container) string { return c.Name })
	pod.Spec.Containers = moveByName(pod.Spec.Containers, n.containers, false,
		func(c corev1.Container) string { return c.Name })
	pod.Spec.Volumes = moveByName(pod.Spec.Volumes, n.volumes, false,
		func(v corev1.Volume) string { return v.Name })
}

// moveByName returns list with the elements named in names, in that
// order, at the front (first) or at the back; the others keep their
// order.
func moveByName[T any](list []T, names []string, first bool, name func(T) string) []T {
	if len(names) == 0 {
		return list
	}
	var injected, rest []T
	for _, n := range names {
		for _, e := range list {
			if name(e) == n {
				injected = append(injected, e)
				break
			}
		}
	}
	for _, e := range list {
		if !slices.Contains(names, name(e)) {
			rest = append(rest, e)
		}
	}
	if first {
		return append(injected, rest...)
	}
	return append(rest, injected...)
}
