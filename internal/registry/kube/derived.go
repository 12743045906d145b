package kube

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/straitmesh/strait/internal/istioconfig"
)

// derivedCache keeps the ServiceEntry made from each Service and the
// WorkloadEntry made from each pod between rebuilds, so that a change to
// one EndpointSlice converts one Service instead of all of them, and the
// unchanged configs keep their pointers (istioconfig.Diff and registry.Build
// then skip them cheaply). An entry is reused only while every input it
// was made from has the same resourceVersion. Owned by the worker.
type derivedCache struct {
	services map[types.UID]derivedService
	pods     map[types.UID]derivedPod
	// nodeLocality is the locality of a node by name (nil: unknown);
	// nodesGen changes when a node's locality does, which makes every
	// entry stale (their pods' localities may come from the nodes).
	nodeLocality func(node string) string
	nodesGen     uint64
}

// derivedService is a Service's ServiceEntry and what it was made from:
// the Service, its EndpointSlices and the pods whose labels its endpoints
// carry, each by resourceVersion.
type derivedService struct {
	serviceRV string
	slices    []objectVersion
	pods      []objectVersion
	nodesGen  uint64
	cfg       *istioconfig.Config
}

type derivedPod struct {
	rv       string
	nodesGen uint64
	cfg      *istioconfig.Config
}

// objectVersion is one input of a derived config: namespace/name and the
// resourceVersion seen ("" when the object was missing).
type objectVersion struct {
	key, rv string
}

func newDerivedCache() *derivedCache {
	return &derivedCache{services: map[types.UID]derivedService{}, pods: map[types.UID]derivedPod{}}
}

// podLookup finds a pod by namespace/name in the pod informer's cache.
type podLookup func(key string) (*corev1.Pod, bool)

// serviceEntry returns svc's ServiceEntry (nil for Services the mesh does
// not serve), reusing the cached one when nothing it was made from changed.
// seen collects the UIDs in use, so that prune can drop the others.
func (d *derivedCache) serviceEntry(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, pods podLookup, domain string, seen map[types.UID]bool) *istioconfig.Config {
	seen[svc.UID] = true
	sliceVersions := make([]objectVersion, len(eps))
	for i, s := range eps {
		sliceVersions[i] = objectVersion{key: s.Name, rv: s.ResourceVersion}
	}
	if c, ok := d.services[svc.UID]; ok && c.serviceRV == svc.ResourceVersion && c.nodesGen == d.nodesGen && slices.Equal(c.slices, sliceVersions) && podsUnchanged(c.pods, pods) {
		return c.cfg
	}
	var podVersions []objectVersion
	labels := func(ns, name string) (map[string]string, string) {
		key := ns + "/" + name
		p, ok := pods(key)
		if !ok {
			podVersions = append(podVersions, objectVersion{key: key})
			return nil, ""
		}
		podVersions = append(podVersions, objectVersion{key: key, rv: p.ResourceVersion})
		return p.Labels, podLocality(p, d.nodeLocality)
	}
	cfg := serviceEntryFor(svc, eps, labels, domain)
	d.services[svc.UID] = derivedService{serviceRV: svc.ResourceVersion, slices: sliceVersions, pods: podVersions, nodesGen: d.nodesGen, cfg: cfg}
	return cfg
}

func podsUnchanged(seen []objectVersion, pods podLookup) bool {
	for _, v := range seen {
		p, ok := pods(v.key)
		switch {
		case !ok && v.rv != "":
			return false
		case ok && p.ResourceVersion != v.rv:
			return false
		}
	}
	return true
}

// workloadEntry returns pod's WorkloadEntry (nil for pods that are not
// addressable), reusing the cached one while the pod is unchanged.
func (d *derivedCache) workloadEntry(pod *corev1.Pod, seen map[types.UID]bool) *istioconfig.Config {
	seen[pod.UID] = true
	if c, ok := d.pods[pod.UID]; ok && c.rv == pod.ResourceVersion && c.nodesGen == d.nodesGen {
		return c.cfg
	}
	cfg := workloadEntryFor(pod, podLocality(pod, d.nodeLocality))
	d.pods[pod.UID] = derivedPod{rv: pod.ResourceVersion, nodesGen: d.nodesGen, cfg: cfg}
	return cfg
}

// prune drops the entries of objects that no longer exist.
func (d *derivedCache) prune(seen map[types.UID]bool) {
	for uid := range d.services {
		if !seen[uid] {
			delete(d.services, uid)
		}
	}
	for uid := range d.pods {
		if !seen[uid] {
			delete(d.pods, uid)
		}
	}
}
