package e2e

// The pods of the one-node cluster test (TestKubeSeedFlow): waiting for them
// and describing them as kubectl get pods would.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// waitPodsReady waits until the selector matches between min and max
// pods, all Running with every container ready, and returns them.
func waitPodsReady(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, selector string, minPods, maxPods int) []corev1.Pod {
	t.Helper()
	var ready []corev1.Pod
	waitEvery(ctx, t, 4*time.Minute, kubePollInterval, fmt.Sprintf("pods %s in %s not ready", selector, ns), func() error {
		list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		ready = nil
		var states []string
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			states = append(states, podState(p))
			if p.Status.Phase == corev1.PodRunning && allReady(p) {
				ready = append(ready, p)
			}
		}
		if len(ready) == len(states) && len(ready) >= minPods && len(ready) <= maxPods {
			return nil
		}
		if err := nodeTrouble(ctx, client); err != nil {
			return fmt.Errorf("%s; %w", strings.Join(states, "; "), err)
		}
		return errors.New(strings.Join(states, "; "))
	})
	return ready
}

// nodeTrouble reports a node under pressure (wrapping errGiveUp: its
// eviction manager has deleted images and evicted pods, and pods wait
// for it in vain), or the taints that keep pods off a node.
func nodeTrouble(ctx context.Context, client kubernetes.Interface) error {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var taints []string
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			switch c.Type {
			case corev1.NodeDiskPressure, corev1.NodeMemoryPressure, corev1.NodePIDPressure:
				if c.Status == corev1.ConditionTrue {
					return fmt.Errorf("node %s has %s (%s); is the machine's disk or memory full? (df -h /; free -m): %w",
						n.Name, c.Type, c.Message, errGiveUp)
				}
			}
		}
		for _, taint := range n.Spec.Taints {
			taints = append(taints, n.Name+": "+taint.ToString())
		}
	}
	if len(taints) > 0 {
		return fmt.Errorf("node taints %v", taints)
	}
	return nil
}

func allReady(p corev1.Pod) bool {
	if len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if !c.Ready {
			return false
		}
	}
	return true
}

// podState is `kubectl get pods`' view of a pod: name, READY, phase, and
// the waiting reasons.
func podState(p corev1.Pod) string {
	// As kubectl counts: the containers and the native sidecars (init
	// containers with restartPolicy Always).
	ready, total := 0, len(p.Spec.Containers)
	var why []string
	for _, c := range p.Status.ContainerStatuses {
		if c.Ready {
			ready++
		}
	}
	for i, c := range p.Spec.InitContainers {
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			continue
		}
		total++
		if i < len(p.Status.InitContainerStatuses) && p.Status.InitContainerStatuses[i].Ready {
			ready++
		}
	}
	for _, c := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := c.State.Waiting; w != nil {
			why = append(why, c.Name+": "+w.Reason+" "+w.Message)
		}
		if term := c.State.Terminated; term != nil && term.ExitCode != 0 {
			why = append(why, fmt.Sprintf("%s: exit %d %s", c.Name, term.ExitCode, term.Message))
		}
	}
	return fmt.Sprintf("%s %d/%d %s %v", p.Name, ready, total, p.Status.Phase, why)
}

func containerNames(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func podNamed(pods []corev1.Pod, app string) string {
	for _, p := range pods {
		if p.Labels["app"] == app {
			return p.Name
		}
	}
	return ""
}

// waitServiceAccount waits for the namespace's default service account.
func waitServiceAccount(ctx context.Context, t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	waitEvery(ctx, t, time.Minute, kubePollInterval, "no default service account in "+ns, func() error {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}
