package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/straitmesh/strait/internal/proxypush"
)

// lookupTimeout bounds ResolveProxy's direct API request for a pod that
// the informer has not delivered yet.
const lookupTimeout = 2 * time.Second

// ResolveProxy identifies a connecting proxy: in Kubernetes mode the node
// id's IP, pod name and namespace must be a pod of the cluster (from the
// informer cache; a pod too new for the cache is fetched once from the API
// server). A proxy outside a pod (a VM) is accepted when a WorkloadEntry
// (from the cluster or the static source) has its IP.
func (r *Registry) ResolveProxy(p *proxypush.Proxy) error {
	if p == nil {
		return errors.New("no proxy")
	}
	if !r.HasSynced() {
		return errors.New("kube registry: not yet synced with the API server; retry shortly")
	}
	objs, _ := r.pods.GetIndexer().ByIndex(podIPIndex, p.IP)
	var others []string
	for _, o := range objs {
		pod := o.(*corev1.Pod)
		if pod.Name == p.PodName && pod.Namespace == p.Namespace {
			return nil
		}
		others = append(others, pod.Namespace+"/"+pod.Name)
	}
	if len(others) > 0 {
		return fmt.Errorf("node id %q: IP %s belongs to pod %s, not %s/%s", p.ID, p.IP, strings.Join(others, ", "), p.Namespace, p.PodName)
	}
	if w := r.Snapshot().WorkloadByIP(p.IP); w != nil && !isPodWorkload(w) {
		return nil
	}
	// The pod may be newer than the cache.
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	pod, err := r.core.Pods(p.Namespace).Get(ctx, p.PodName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("node id %q: no pod %s/%s with IP %s and no WorkloadEntry with that address: %w", p.ID, p.Namespace, p.PodName, p.IP, err)
	}
	if !podHasIP(pod, p.IP) {
		ips, _ := indexPodIPs(pod)
		return fmt.Errorf("node id %q: pod %s/%s has IPs %v, not %s", p.ID, p.Namespace, p.PodName, ips, p.IP)
	}
	return nil
}
